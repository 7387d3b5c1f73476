// Presence: which sessions have a connected client. Connections that come and
// go while a write is in flight are written together in the next one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Presence } from '../../src/store/presence.js';
import type { Orm } from '../../src/store/orm.js';
import { migratedOrm } from '../support/db.js';

let store: Awaited<ReturnType<typeof migratedOrm>>;
let orm: Orm;

beforeAll(async () => {
  store = await migratedOrm();
  orm = store.orm;
  for (const s of ['sess_p1', 'sess_p2', 'sess_p3']) await orm.em.fork().execute("INSERT INTO sessions (session_id, user_id, tenant_id) VALUES (?, 'u', 'default')", [s]);
});
afterAll(() => store.close());

const rows = () => orm.em.fork().execute<{ connection_id: string; session_id: string; core_id: string }[]>('SELECT connection_id, session_id, core_id FROM client_connections ORDER BY connection_id, session_id');

describe('presence', () => {
  it('writes the joins and leaves that arrive together in one commit, a connection that closed in it leaving no row', async () => {
    const presence = new Presence(orm, 'core_p', 60_000);
    await presence.join('conn_a', 'sess_p1', 'u');
    // Together: two new connections, one watching two sessions (one of them twice), a leave of an earlier one,
    // and a connection that joins and closes before its join is written.
    await Promise.all([
      presence.join('conn_b', 'sess_p1', 'u'),
      presence.join('conn_b', 'sess_p2', 'u'),
      presence.join('conn_b', 'sess_p2', 'u'),
      presence.join('conn_c', 'sess_p3', 'u'),
      presence.leave('conn_a'),
      presence.join('conn_d', 'sess_p3', 'u'),
      presence.leave('conn_d'),
    ]);
    expect(await rows()).toEqual([
      { connection_id: 'conn_b', session_id: 'sess_p1', core_id: 'core_p' },
      { connection_id: 'conn_b', session_id: 'sess_p2', core_id: 'core_p' },
      { connection_id: 'conn_c', session_id: 'sess_p3', core_id: 'core_p' },
    ]);
    const [commits] = await orm.em.fork().execute<{ n: number }[]>('SELECT count(DISTINCT xmin::text)::int AS n FROM client_connections');
    expect(commits!.n).toBe(1);
    expect(await presence.online('sess_p1')).toBe(true);
    expect(await presence.online('sess_missing')).toBe(false);
    await Promise.all([presence.leave('conn_b'), presence.leave('conn_c')]);
    expect(await rows()).toEqual([]);
    expect(await presence.online('sess_p1')).toBe(false);
    await presence.close();
  });

  it('fails only the change the database refuses, and writes the others of its group', async () => {
    const presence = new Presence(orm, 'core_q', 60_000);
    const [bad, good] = await Promise.allSettled([presence.join('conn_e', 's'.repeat(65), 'u'), presence.join('conn_f', 'sess_p1', 'u')]);
    expect(bad.status).toBe('rejected');
    expect(good.status).toBe('fulfilled');
    expect(await rows()).toEqual([{ connection_id: 'conn_f', session_id: 'sess_p1', core_id: 'core_q' }]);
    await presence.leave('conn_f');
    await presence.close();
  });
});
