// ARCHITECTURE §5: idempotency keys and API keys.
import { defineEntity, p } from '@mikro-orm/core';

/** (scope, key) -> the first request's hash and response; expires after 24 h. */
export const IdempotencyKey = defineEntity({
  name: 'IdempotencyKey',
  tableName: 'idempotency_keys',
  properties: {
    scope: p.string().length(64).primary(),
    key: p.string().length(256).primary(),
    requestHash: p.string().length(64),
    response: p.json<unknown>().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    expiresAt: p.datetime().index('idx_idempotency_keys_expiry'),
  },
});

/** API keys are stored as SHA-256 hashes; the key itself is shown once. */
export const ApiKey = defineEntity({
  name: 'ApiKey',
  tableName: 'api_keys',
  properties: {
    keyId: p.string().length(64).primary(),
    name: p.string().length(128),
    keyHash: p.string().length(64).unique(),
    prefix: p.string().length(16),
    createdAt: p.datetime().defaultRaw('now()'),
    lastUsedAt: p.datetime().nullable(),
    revokedAt: p.datetime().nullable(),
    /** The tenant the key acts in; every resource it creates belongs to it. */
    tenantId: p.string().length(64).default('default'),
    /** What the key may do (access/scopes.ts). */
    scopes: p.json<string[]>().defaultRaw(`'["admin"]'`),
    /** The IM users the key may speak for; null means any user of its tenant. */
    userIds: p.json<string[]>().nullable(),
  },
});

/** A tenant: the boundary no resource crosses. `default` always exists. */
export const Tenant = defineEntity({
  name: 'Tenant',
  tableName: 'tenants',
  properties: {
    tenantId: p.string().length(64).primary(),
    name: p.string().length(128),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});

/** Tokens a tenant's LLM calls used per UTC day, for its daily budget. */
export const TokenUsage = defineEntity({
  name: 'TokenUsage',
  tableName: 'token_usage',
  properties: {
    tenantId: p.string().length(64).primary(),
    day: p.date().primary(),
    tokens: p.bigint().default(0),
  },
});

/** Secrets (connector credentials), sealed at rest; every write is a new version. */
export const Secret = defineEntity({
  name: 'Secret',
  tableName: 'secrets',
  properties: {
    tenantId: p.string().length(64).primary(),
    name: p.string().length(128).primary(),
    version: p.integer().primary(),
    /** The value sealed by the secret box (AES-256-GCM); never stored in the clear. */
    sealed: p.text(),
    createdAt: p.datetime().defaultRaw('now()'),
    /** After this, the version is refused; null while it is the current one. */
    retiresAt: p.datetime().nullable(),
  },
});
