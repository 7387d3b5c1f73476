// A state machine is a table plus one pure function. The table is the single
// source for behaviour and for the observer's topology.
import { err, ok, type Result } from './result.js';

export interface MachineSpec<S extends string, T extends string> {
  name: string;
  initial: S;
  states: readonly S[];
  /** state -> trigger -> next state. Missing entries are illegal. */
  transitions: { readonly [K in S]: Partial<Record<T, S>> };
  /** Which actors may fire each trigger (topology documentation). */
  actors: Readonly<Record<T, readonly string[]>>;
  /** States a suspended execution resumes from. */
  resumable?: readonly S[];
}

export interface Machine<S extends string, T extends string> extends MachineSpec<S, T> {
  terminal: readonly S[];
  isTerminal(state: S): boolean;
}

export interface IllegalTransition {
  code: 'illegal_transition';
  machine: string;
  from: string;
  trigger: string;
}

/** Builds a machine; terminal states are those with no exits. */
export function defineMachine<S extends string, T extends string>(spec: MachineSpec<S, T>): Machine<S, T> {
  const terminal = spec.states.filter((s) => Object.keys(spec.transitions[s]).length === 0);
  return { ...spec, terminal, isTerminal: (s) => terminal.includes(s) };
}

/** The next state for (from, trigger), or an IllegalTransition error. Pure. */
export function transition<S extends string, T extends string>(machine: Machine<S, T>, from: S, trigger: T): Result<S, IllegalTransition> {
  const to = machine.transitions[from]?.[trigger];
  return to ? ok(to) : err({ code: 'illegal_transition', machine: machine.name, from, trigger });
}
