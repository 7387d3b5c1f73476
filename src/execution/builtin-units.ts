// ABC's generic execution units, usable by any assembly: an LLM completion
// through the proxy, and text statistics. Business units come from packs.
import { AbcError } from '../domain/errors.js';
import type { ExecutionUnit, UnitContext } from '../ports/pack.js';

const outputSchema = (required: string[]) => ({ type: 'object', required, properties: Object.fromEntries(required.map((r) => [r, {}])) });

/** Words per minute of silent reading, for `reading_minutes`. */
const READING_WPM = 230;

export const BUILTIN_UNITS: Record<string, ExecutionUnit> = {
  /**
   * One chat completion. Input: `prompt` (a string, or any value sent as JSON),
   * optional `instructions` (the system message), `format` (`text` or `json`),
   * `temperature`. A `max_tokens` constraint on the capability caps the answer.
   */
  'llm.complete': {
    meta: { version: '1.0.0', permission_level: 'PUBLIC', side_effect: false, timeout_ms: 30_000, output_schema: outputSchema(['text', 'model']) },
    run: async (ctx: UnitContext) => {
      if (!ctx.llm) throw new AbcError('FAILED_PRECONDITION', { code: 'LLM_NOT_CONFIGURED', category: 'COMPLIANCE', message: 'no LLM router is configured', retryable: false });
      const { prompt, instructions, format = 'text', temperature = 0 } = ctx.input as { prompt?: unknown; instructions?: unknown; format?: unknown; temperature?: unknown };
      if (prompt === undefined || prompt === null || prompt === '') throw badInput('llm.complete needs a prompt');
      if (format !== 'text' && format !== 'json') throw badInput('format must be text or json');
      const completion = await ctx.llm.client(ctx.onLlmCall).chat.completions.create(
        {
          model: ctx.llm.model,
          temperature: typeof temperature === 'number' ? temperature : 0,
          ...(typeof ctx.constraints?.max_tokens === 'number' && { max_tokens: ctx.constraints.max_tokens }),
          messages: [
            ...(typeof instructions === 'string' && instructions ? [{ role: 'system' as const, content: instructions }] : []),
            { role: 'user' as const, content: typeof prompt === 'string' ? prompt : JSON.stringify(prompt) },
          ],
        },
        { signal: ctx.signal },
      );
      const text = completion.choices[0]?.message?.content?.trim() ?? '';
      if (!text) throw new AbcError('INTERNAL', { code: 'LLM_BAD_OUTPUT', category: 'EXECUTION', message: 'the LLM answered nothing', retryable: true });
      if (format === 'text') return { text, model: completion.model };
      try {
        return { text, json: JSON.parse(text) as unknown, model: completion.model };
      } catch {
        throw new AbcError('INTERNAL', { code: 'LLM_BAD_OUTPUT', category: 'EXECUTION', message: 'the LLM did not answer JSON', retryable: true });
      }
    },
  },

  /** Counts of a text (`text`, any language): characters, words, sentences, paragraphs, and reading time. */
  'text.stats': {
    meta: { version: '1.0.0', permission_level: 'PUBLIC', side_effect: false, timeout_ms: 5000, output_schema: outputSchema(['characters', 'words', 'sentences', 'paragraphs', 'reading_minutes']) },
    run: async (ctx: UnitContext) => {
      const text = ctx.input.text;
      if (typeof text !== 'string') throw badInput('text.stats needs a string text');
      const locale = typeof ctx.input.locale === 'string' ? ctx.input.locale : undefined;
      const words = [...new Intl.Segmenter(locale, { granularity: 'word' }).segment(text)].filter((s) => s.isWordLike).length;
      const sentences = [...new Intl.Segmenter(locale, { granularity: 'sentence' }).segment(text)].filter((s) => s.segment.trim()).length;
      return {
        characters: [...text].length,
        words,
        sentences,
        paragraphs: text.split(/\n\s*\n/).filter((p) => p.trim()).length,
        reading_minutes: Math.max(1, Math.ceil(words / READING_WPM)),
      };
    },
  },
};

const badInput = (message: string) => new AbcError('INVALID_ARGUMENT', { code: 'STEP_INPUT_INVALID', category: 'VALIDATION', message, retryable: false });
