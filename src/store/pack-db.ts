// Packs reach the database only through this: SQL on their own tables, and
// their migrations, recorded once each in `pack_migrations`.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { AssemblyPack, PackDb } from '../ports/pack.js';
import type { Orm } from './orm.js';

export function packDb(em: () => EntityManager): PackDb {
  const over = (run: () => EntityManager): PackDb => ({
    query: <T extends object>(sql: string, params: unknown[] = []) => run().execute<T[]>(sql, params),
    transaction: (work) => run().transactional((tx) => work(over(() => tx))),
  });
  return over(em);
}

/** Applies the packs' pending migrations, each in its own transaction; returns `pack/name` of those applied. */
export async function migratePacks(orm: Orm, packs: readonly AssemblyPack[]): Promise<string[]> {
  const em = orm.em.fork();
  await em.execute('create table if not exists "pack_migrations" ("pack" varchar(128) not null, "name" varchar(128) not null, "applied_at" timestamptz not null default now(), primary key ("pack", "name"))');
  const applied: string[] = [];
  for (const pack of packs) {
    for (const m of pack.migrations ?? []) {
      await orm.em.fork().transactional(async (tx) => {
        // The lock makes concurrent cores apply each migration once.
        await tx.execute('SELECT pg_advisory_xact_lock(hashtext(?))', [`pack:${pack.name}`]);
        const [done] = await tx.execute<{ name: string }[]>('SELECT name FROM pack_migrations WHERE pack = ? AND name = ?', [pack.name, m.name]);
        if (done) return;
        for (const sql of m.sql) await tx.execute(sql);
        await tx.execute('INSERT INTO pack_migrations (pack, name) VALUES (?, ?)', [pack.name, m.name]);
        applied.push(`${pack.name}/${m.name}`);
      });
    }
  }
  return applied;
}
