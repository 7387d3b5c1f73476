// A tool call that failed, with the code seed 001 names for it.

export type ToolFailureCode = 'tool_failed' | 'tool_timeout' | 'invalid_output' | 'invalid_args';

export class ToolFailure extends Error {
  constructor(
    readonly code: ToolFailureCode,
    message: string,
    options?: { cause?: unknown; detail?: Record<string, unknown> },
  ) {
    super(message, options);
    /** The tool's own error object (`{error: {...}}` in a non-2xx JSON answer), if it sent one. */
    this.detail = options?.detail;
    this.name = 'ToolFailure';
  }

  readonly detail: Record<string, unknown> | undefined;
}
