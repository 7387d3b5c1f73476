// A business contract version (seed 000): its manifest and its five JSON Schemas.

export const SCHEMA_KINDS = ['request', 'submit-response', 'result', 'poll-response', 'error'] as const;
export type SchemaKind = (typeof SCHEMA_KINDS)[number];

export interface ContractManifest {
  contract_id: string;
  version: string;
  intent: string;
  description?: string;
}

/** A contract version as defined: request and result schemas are required; the envelopes are derived when absent. */
export interface ContractDefinition extends ContractManifest {
  schemas: { request: Record<string, unknown>; result: Record<string, unknown> } & Partial<Record<SchemaKind, Record<string, unknown>>>;
}

export interface ContractVersion extends ContractManifest {
  /** Shipped in a folder, or registered through the API. */
  source: 'file' | 'api';
  schemas: Record<SchemaKind, Record<string, unknown>>;
}

/** One violation, located by a JSON pointer into the validated document. */
export interface Violation {
  pointer: string;
  keyword: string;
  message: string;
}

export type Validation = { ok: true } | { ok: false; violations: Violation[] };
