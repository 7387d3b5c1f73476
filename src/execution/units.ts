// The execution units behind contract plan steps: ABC's generic built-ins and
// every pack's. Each does one step and returns its output; none decides the
// flow. The PEP (engine/pep.ts) decides whether a unit may run at all.
import { AbcError } from '../domain/errors.js';
import type { AssemblyPack, ExecutionUnit, UnitMeta } from '../ports/pack.js';
import { BUILTIN_UNITS } from './builtin-units.js';

export class UnitCatalog {
  readonly #units = new Map<string, ExecutionUnit>();

  constructor(packs: readonly AssemblyPack[]) {
    const owners = new Map<string, string>();
    for (const [source, units] of [['abc', BUILTIN_UNITS] as const, ...packs.map((p) => [p.name, p.units] as const)]) {
      for (const [name, unit] of Object.entries(units)) {
        if (owners.has(name)) throw new Error(`capability ${name} is served twice: by ${owners.get(name)} and by ${source}`);
        owners.set(name, source);
        this.#units.set(name, unit);
      }
    }
  }

  meta(capability: string): UnitMeta | undefined {
    return this.#units.get(capability)?.meta;
  }

  /** The unit serving `capability`; a plan naming one that does not exist is a bug of the planner. */
  unit(capability: string): ExecutionUnit {
    const unit = this.#units.get(capability);
    if (!unit) throw new AbcError('INTERNAL', { code: 'NO_EXECUTION_UNIT', category: 'INTERNAL', message: `no execution unit serves ${capability}`, retryable: false });
    return unit;
  }

  /** The capabilities granted: LLM ones (`llm.*`) only with a router. */
  names(llmConfigured: boolean): string[] {
    return [...this.#units.keys()].filter((c) => llmConfigured || !c.startsWith('llm.'));
  }
}
