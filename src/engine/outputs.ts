// How an execution's step outputs become its result, its partial result and its
// artifact: the owning pack's code when a pack owns the assembly, else the
// assembly's declarative `output` (JSON pointers and a template), else the
// outputs by step id.
import type { AssemblyDef, OutputSpec } from '../decision/planner.js';
import { REQUEST_REF } from '../decision/planner.js';
import { getPointer, setPointer } from '../domain/pointer.js';
import { renderTemplate } from '../domain/template.js';
import type { AssemblyOutput, AssemblyPack } from '../ports/pack.js';

export class AssemblyOutputs {
  readonly #owned = new Map<string, AssemblyOutput>();

  constructor(packs: readonly AssemblyPack[]) {
    for (const pack of packs) {
      for (const [assemblyId, output] of Object.entries(pack.outputs ?? {})) {
        if (this.#owned.has(assemblyId)) throw new Error(`assembly ${assemblyId} is owned by two packs (the second is ${pack.name})`);
        this.#owned.set(assemblyId, output);
      }
    }
  }

  of(assembly: AssemblyDef | undefined): AssemblyOutput {
    return (assembly && this.#owned.get(assembly.assembly_id)) ?? declarativeOutput(assembly?.output);
  }
}

export function declarativeOutput(spec: OutputSpec | undefined): AssemblyOutput {
  const build = (map: Record<string, string>, request: Record<string, unknown>, outputs: Record<string, unknown>) => {
    const doc: Record<string, unknown> = {};
    for (const [target, source] of Object.entries(map)) {
      const value = source.startsWith(REQUEST_REF) ? getPointer(request, source.slice(REQUEST_REF.length)) : getPointer(outputs, source);
      if (value !== undefined) setPointer(doc, target, value);
    }
    return doc;
  };
  return {
    aggregate: (request, outputs) => ({ result: spec ? build(spec.result, request, outputs) : { ...outputs }, warnings: [] }),
    partialResult: (request, outputs) => {
      if (!spec?.partial) return null;
      const partial = build(spec.partial, request, outputs);
      return Object.keys(partial).length ? partial : null;
    },
    render: (request, result) =>
      spec?.markdown && getPointer(request, '/output_spec/format') === 'markdown'
        ? { content: renderTemplate(spec.markdown, result), mediaType: 'text/markdown; charset=utf-8' }
        : { content: JSON.stringify(result), mediaType: 'application/json' },
  };
}
