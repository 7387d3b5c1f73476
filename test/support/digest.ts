// A digest of tables' rows, to prove that reads write nothing.
import { createHash } from 'node:crypto';
import type { Orm } from '../../src/store/orm.js';

export async function tableDigest(orm: Orm, tables: string[]): Promise<string> {
  const em = orm.em.fork();
  const parts: string[] = [];
  for (const t of tables) {
    const [row] = await em.execute<{ digest: string | null; n: number }[]>(`SELECT md5(string_agg(x::text, '|' ORDER BY x::text)) AS digest, count(*)::int AS n FROM ${t} x`);
    parts.push(`${t}:${row!.n}:${row!.digest}`);
  }
  return createHash('sha256').update(parts.join('\n')).digest('hex');
}
