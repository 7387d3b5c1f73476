// Stream tokens are signed, short-lived and bound to what they name.
import { describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/access/secret-box.js';
import { streamTarget, StreamTokens } from '../../src/access/stream-tokens.js';

const key = { kind: 'key', keyId: 'key_1', name: 'web', tenantId: 'acme', scopes: ['client'], userIds: ['alice'] } as const;

describe('stream tokens', () => {
  it('carry the tenant, the run and the users of the key that minted them, until they expire', () => {
    const tokens = new StreamTokens(SecretBox.ephemeral());
    const { token, expiresAt } = tokens.mint(key, streamTarget('run_1', '', 60), 1_000_000);
    expect(expiresAt).toBe(1_060_000);
    expect(tokens.verify(token, 1_059_000)).toEqual({ kind: 'stream', tenantId: 'acme', keyId: 'key_1', runId: 'run_1', sessionId: '', userIds: ['alice'] });
    expect(tokens.verify(token, 1_060_000)).toBeNull();
  });

  it('are refused when altered, or signed under another secret key', () => {
    const box = SecretBox.ephemeral();
    const { token } = new StreamTokens(box).mint(key, streamTarget('run_1', '', 60));
    const [body, mac] = token.slice('abcst_'.length).split('.');
    const claims = JSON.parse(Buffer.from(body!, 'base64url').toString());
    const widened = Buffer.from(JSON.stringify({ ...claims, t: 'default' })).toString('base64url');
    expect(new StreamTokens(box).verify(`abcst_${widened}.${mac}`)).toBeNull();
    expect(new StreamTokens(SecretBox.ephemeral()).verify(token)).toBeNull();
    expect(new StreamTokens(box).verify('abcst_garbage')).toBeNull();
  });

  it('name exactly one run or session, for at most an hour', () => {
    expect(() => streamTarget('', '', 60)).toThrow(/exactly one/);
    expect(() => streamTarget('r', 's', 60)).toThrow(/exactly one/);
    expect(() => streamTarget('r', '', 3601)).toThrow(/ttl_seconds/);
    expect(streamTarget('r', '', 0).ttlSeconds).toBe(300);
  });
});
