// Presence: which sessions have a connected client. Connections that come and
// go while a write is in flight are written together in the next one.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refusedByServer } from '../../src/store/native.js';
import { Presence } from '../../src/store/presence.js';
import { createOrm, type Orm } from '../../src/store/orm.js';
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
    // The refused join is forgotten: a refresh carries only the rows that were written.
    await presence.refresh();
    expect(await rows()).toEqual([{ connection_id: 'conn_f', session_id: 'sess_p1', core_id: 'core_q' }]);
    await presence.leave('conn_f');
    await presence.close();
  });

  it("deletes rows no core refreshed within the TTL, in batches, and a live core's refresh writes its rows back", async () => {
    const presence = new Presence(orm, 'core_r', 60_000);
    await Promise.all([presence.join('conn_g', 'sess_p1', 'u'), presence.join('conn_g', 'sess_p2', 'u'), presence.join('conn_h', 'sess_p3', 'u')]);
    // A core that died two minutes ago left three rows; this core could not refresh conn_g's first row for as long.
    await orm.em.fork().execute(
      "INSERT INTO client_connections (connection_id, session_id, user_id, core_id, seen_at) SELECT 'conn_dead' || g, 'sess_p2', 'u', 'core_dead', now() - interval '2 minutes' FROM generate_series(1, 3) g",
    );
    await orm.em.fork().execute("UPDATE client_connections SET seen_at = now() - interval '2 minutes' WHERE connection_id = 'conn_g' AND session_id = 'sess_p1'");
    expect(await presence.online('sess_p1')).toBe(false);

    // Another transaction holds one stale row: the sweep leaves it to that transaction.
    const holder = orm.em.fork();
    await holder.begin();
    await holder.execute("SELECT 1 FROM client_connections WHERE connection_id = 'conn_dead3' FOR UPDATE");
    expect(await presence.deleteStale(2)).toBe(2);
    expect(await presence.deleteStale(2)).toBe(1);
    expect(await presence.deleteStale(2)).toBe(0);
    await holder.commit();
    expect(await presence.deleteStale(2)).toBe(1);
    expect((await rows()).map((r) => `${r.connection_id} ${r.session_id}`)).toEqual(['conn_g sess_p2', 'conn_h sess_p3']);

    // The refresh writes every live row by its key: the deleted one comes back, fresh, and the dead core's stay gone.
    await presence.refresh();
    expect((await rows()).map((r) => `${r.connection_id} ${r.session_id}`)).toEqual(['conn_g sess_p1', 'conn_g sess_p2', 'conn_h sess_p3']);
    expect(await presence.online('sess_p1')).toBe(true);

    // A connection that closes while a refresh is asked for (either order) is not written back.
    await Promise.all([presence.refresh(), presence.leave('conn_g')]);
    await Promise.all([presence.leave('conn_h'), presence.refresh()]);
    expect(await rows()).toEqual([]);
    await presence.close();
  });

  it('keeps a join that could not reach the database, and the next refresh writes it', async () => {
    // ABC's pool reaches PostgreSQL through a TCP relay that the test can cut, as a network outage would.
    const target = new URL(store.db.url);
    const socketDir = target.searchParams.get('host'); // libpq's Unix socket directory, when the URL names one
    let down = false;
    const sockets = new Set<net.Socket>();
    const relay = net.createServer((client) => {
      if (down) return client.destroy();
      const server = socketDir ? net.connect(`${socketDir}/.s.PGSQL.${target.port}`) : net.connect(Number(target.port), target.hostname);
      for (const [a, b] of [[client, server], [server, client]] as const) {
        sockets.add(a);
        a.pipe(b);
        a.on('error', () => b.destroy()).on('close', () => (sockets.delete(a), b.destroy()));
      }
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    const relayed = new URL(store.db.url);
    relayed.hostname = '127.0.0.1';
    relayed.port = String((relay.address() as net.AddressInfo).port);
    relayed.searchParams.delete('host');
    const away = await createOrm({ url: relayed.toString(), poolMax: 2 });
    const presence = new Presence(away, 'core_s', 60_000);
    try {
      await presence.join('conn_i', 'sess_p1', 'u');
      down = true;
      for (const socket of sockets) socket.destroy();
      const failed = await presence.join('conn_j', 'sess_p2', 'u').then(() => undefined, (error: unknown) => error);
      expect(failed).toBeDefined();
      expect(refusedByServer(failed)).toBe(false);
      expect((await rows()).map((r) => r.connection_id)).toEqual(['conn_i']);

      down = false;
      await presence.refresh();
      expect(await rows()).toEqual([
        { connection_id: 'conn_i', session_id: 'sess_p1', core_id: 'core_s' },
        { connection_id: 'conn_j', session_id: 'sess_p2', core_id: 'core_s' },
      ]);
      await Promise.all([presence.leave('conn_i'), presence.leave('conn_j')]);
      expect(await rows()).toEqual([]);
    } finally {
      await presence.close();
      await away.close();
      for (const socket of sockets) socket.destroy(); // the pool's idle connections would hold the relay open
      await new Promise((resolve) => relay.close(resolve));
    }
  });
});
