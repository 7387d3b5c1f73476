import { createLogger } from '../src/log.js';
import { startEmbeddedPostgres } from '../src/store/embedded-pg.js';
import { ensureDatabase } from '../src/store/database.js';
import { createOrm, migrate } from '../src/store/orm.js';
import { Session } from '../src/store/entities/index.js';
const c = await startEmbeddedPostgres({ dataDir: '/tmp/abct/pg', logger: createLogger('warn'), ephemeral: true });
try {
  await ensureDatabase(c.adminUrl, 'abc');
  const orm = await createOrm({ url: c.url('abc') });
  await migrate(orm);
  const r = await orm.em.fork().transactional(async (tx) => {
    tx.create(Session, { sessionId: 's1', userId: 'u' });
    await tx.flush();
    const rows = await tx.execute('select session_id, $1::text as x, ?::jsonb as j from sessions where session_id = ?', ['hello', JSON.stringify({a:1}), 's1']);
    return rows;
  }).catch(e => 'ERR ' + e.message);
  console.log(r);
  const r2 = await orm.em.fork().execute('select ?::int + 1 as n, ? as s', [41, 'x'], 'all');
  console.log(r2);
  await orm.close();
} finally { await c.stop(); }
