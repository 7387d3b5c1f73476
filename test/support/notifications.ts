// A real LISTEN on one channel, for tests of what statements notify.
import pg from 'pg';

export interface Listening {
  /** Every notification so far, in the order received, with the backend that sent it. */
  notified: { payload: string; from: number }[];
  payloads(): string[];
  end(): Promise<void>;
}

export async function listen(url: string, channel: string): Promise<Listening> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const notified: Listening['notified'] = [];
  client.on('notification', (m) => notified.push({ payload: m.payload ?? '', from: m.processId }));
  await client.query(`LISTEN ${channel}`);
  return { notified, payloads: () => notified.map((n) => n.payload), end: () => client.end() };
}
