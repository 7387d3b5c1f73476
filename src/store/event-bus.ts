// Cross-process wake-ups over PostgreSQL LISTEN/NOTIFY. A notification only says
// "look again"; watchers always read the log from their own cursor.
import { EventEmitter } from 'node:events';
import pg from 'pg';
import type { Logger } from '../log.js';
import { EVENTS_CHANNEL } from './event-log.js';

/** Payload: the id of a run or ticket just cancelled. */
export const CANCEL_CHANNEL = 'abc_run_cancel';
/** Payload: a ticket whose execution row changed. */
export const TICKETS_CHANNEL = 'abc_tickets';

export class EventBus {
  readonly #url: string;
  readonly #log: Logger;
  readonly #wakes = new EventEmitter();
  readonly #cancels = new EventEmitter();
  #client: pg.Client | undefined;
  #closed = false;

  private constructor(url: string, log: Logger) {
    this.#url = url;
    this.#log = log;
    this.#wakes.setMaxListeners(0);
    this.#cancels.setMaxListeners(0);
  }

  static async start(url: string, log: Logger): Promise<EventBus> {
    const bus = new EventBus(url, log.child({ component: 'event-bus' }));
    await bus.#connect();
    return bus;
  }

  async #connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.#url });
    client.on('notification', (n) => this.#dispatch(n.channel, n.payload ?? ''));
    client.on('error', (error) => this.#log.warn({ err: error }, 'listener connection failed'));
    client.on('end', () => {
      if (this.#closed) return;
      this.#client = undefined;
      setTimeout(() => void this.#reconnect(), 200).unref();
    });
    await client.connect();
    await client.query(`LISTEN ${EVENTS_CHANNEL}; LISTEN ${CANCEL_CHANNEL}; LISTEN ${TICKETS_CHANNEL}`);
    this.#client = client;
  }

  async #reconnect(): Promise<void> {
    if (this.#closed) return;
    try {
      await this.#connect();
      // Anything may have been committed while we were away: everyone looks again.
      this.#wakes.emit('*');
      this.#log.info('listener reconnected');
    } catch (error) {
      this.#log.warn({ err: error }, 'listener reconnect failed; retrying');
      setTimeout(() => void this.#reconnect(), 1000).unref();
    }
  }

  #dispatch(channel: string, payload: string): void {
    if (channel === TICKETS_CHANNEL) {
      this.#wakes.emit(`ticket:${payload}`);
      return;
    }
    if (channel === CANCEL_CHANNEL) {
      this.#cancels.emit(payload, payload);
      return;
    }
    const [sessionId, runId] = payload.split(' ');
    this.#wakes.emit(`run:${runId}`);
    this.#wakes.emit(`session:${sessionId}`);
  }

  /** Calls `fn` whenever events of `key` (`run:ID`, `session:ID` or `ticket:ID`) may have been committed. */
  onWake(key: string, fn: () => void): () => void {
    this.#wakes.on(key, fn);
    this.#wakes.on('*', fn);
    return () => {
      this.#wakes.off(key, fn);
      this.#wakes.off('*', fn);
    };
  }

  /** Calls `fn` when a cancel of `id` (a run or a ticket) is announced by any process. */
  onCancel(id: string, fn: () => void): () => void {
    this.#cancels.on(id, fn);
    return () => this.#cancels.off(id, fn);
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#client?.end().catch(() => {});
  }
}
