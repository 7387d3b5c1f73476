// Wake-ups over PostgreSQL LISTEN/NOTIFY, and committed batches handed straight
// to this process's watchers. A notification says "look again" and how far the
// run or session has got; a watcher reads the log from its own cursor, unless a
// local batch follows with no gap what it has. The batches this process
// delivers are announced to the others after their commit (notifier.ts).
import { EventEmitter } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import type { Logger } from '../runtime/log.js';
import { backoffDelay, type RetryPolicy } from '../domain/backoff.js';
import { OUTAGE_RETRY } from './outage.js';
import { EVENTS_CHANNEL, type StoredEvent } from './event-log.js';
import { newId } from '../runtime/new-id.js';
import { Notifier } from './notifier.js';

/** A position from a notification; absent from notifications of older cores. */
const positionOf = (text: string | undefined): number | undefined => (text && /^\d+$/.test(text) ? Number(text) : undefined);

/** Sleeps `ms`, or less when `signal` aborts; keeps no process alive. */
const sleep = (ms: number, signal?: AbortSignal) => delay(ms, undefined, { signal, ref: false }).catch(() => {});

/** Payload: the id of a run or ticket just cancelled. */
export const CANCEL_CHANNEL = 'abc_run_cancel';
/** Payload: the id of a run that has just ended. */
export const RUN_ENDED_CHANNEL = 'abc_run_ended';
/** Payload: a ticket whose execution row changed. */
export const TICKETS_CHANNEL = 'abc_tickets';
/** Payload: a ticket whose lifecycle just ended (wake key `ticket-ended:ID`). */
export const TICKET_ENDED_CHANNEL = 'abc_ticket_ended';
/** A new policy was stored over the API: every core reloads it (wake key `policy`). */
export const POLICY_CHANNEL = 'abc_policy';
/** Payload: the tenant that stored a new assembly version (wake key `assemblies`). */
export const ASSEMBLIES_CHANNEL = 'abc_assemblies';
/** Payload: the tenant that wrote a tool (wake key `tools`). */
export const TOOLS_CHANNEL = 'abc_tools';

/** The listener's application_name, so operators (and tests) can find its backend. */
export const LISTENER_APPLICATION = 'abc-listener';
/** How often the live listener proves its connection with a query; no answer within this long ends it. */
const PROBE_MS = 2000;

export class EventBus {
  readonly #url: string;
  readonly #log: Logger;
  readonly #retry: RetryPolicy;
  readonly #wakes = new EventEmitter();
  readonly #batches = new EventEmitter();
  readonly #cancels = new EventEmitter();
  readonly #states = new EventEmitter();
  readonly #ends = new EventEmitter();
  readonly #notifier: Notifier;
  /** Names this process in the notifications of the batches it delivers itself. */
  readonly origin = newId('bus');
  #client: pg.Client | undefined;
  #closed = false;
  #loop: Promise<void> | undefined;
  #sleep: AbortController | undefined;

  private constructor(url: string, log: Logger, retry: RetryPolicy) {
    this.#url = url;
    this.#log = log;
    this.#retry = retry;
    this.#notifier = new Notifier(this.#log);
    this.#wakes.setMaxListeners(0);
    this.#batches.setMaxListeners(0);
    this.#cancels.setMaxListeners(0);
    this.#states.setMaxListeners(0);
  }

  /** Connects the listener (failing if the first connect fails), then keeps it connected until close(). */
  static async start(url: string, log: Logger, retry: RetryPolicy = OUTAGE_RETRY): Promise<EventBus> {
    const bus = new EventBus(url, log.child({ component: 'event-bus' }), retry);
    const first = await bus.#connect();
    bus.#loop = bus.#keepListening(first);
    return bus;
  }

  /** Whether the listener is connected now: the process can reach its database. */
  get connected(): boolean {
    return this.#client !== undefined;
  }

  /** Calls `fn` with true when the listener (re)connects and false when it loses the database. */
  onState(fn: (connected: boolean) => void): () => void {
    this.#states.on('state', fn);
    return () => this.#states.off('state', fn);
  }

  async #connect(): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: this.#url, connectionTimeoutMillis: 5000, keepAlive: true, application_name: LISTENER_APPLICATION });
    // pg emits 'error' on a broken connection (and 'end' after it, even after a failed connect):
    // the loop below watches 'end' of a connected client only, so each failure retries once.
    client.on('error', (error) => this.#log.debug({ err: error }, 'listener connection error'));
    client.on('notification', (n) => this.#dispatch(n.channel, n.payload ?? ''));
    try {
      await client.connect();
      // Its own commits (announcements) have nothing to make durable.
      await client.query(`SET synchronous_commit = off; LISTEN ${EVENTS_CHANNEL}; LISTEN ${CANCEL_CHANNEL}; LISTEN ${TICKETS_CHANNEL}; LISTEN ${TICKET_ENDED_CHANNEL}; LISTEN ${RUN_ENDED_CHANNEL}; LISTEN ${POLICY_CHANNEL}; LISTEN ${ASSEMBLIES_CHANNEL}; LISTEN ${TOOLS_CHANNEL}`);
      return client;
    } catch (error) {
      await client.end().catch(() => {});
      throw error;
    }
  }

  /** The one reconnect loop: hold a connection until it ends, then back off and connect again. */
  async #keepListening(first: pg.Client): Promise<void> {
    let client: pg.Client | undefined = first;
    let attempt = 0;
    while (!this.#closed) {
      if (client) {
        this.#setClient(client);
        attempt = 0;
        await this.#holdUntilLost(client);
        this.#setClient(undefined);
        client = undefined;
        if (this.#closed) return;
        this.#log.warn('listener lost its connection; reconnecting');
      }
      await this.#pause(backoffDelay(this.#retry, attempt++, Math.random()));
      if (this.#closed) return;
      try {
        client = await this.#connect();
        this.#log.info({ attempts: attempt }, 'listener reconnected');
      } catch (error) {
        if (attempt === 1 || attempt % 10 === 0) this.#log.warn({ err: error, attempts: attempt }, 'listener reconnect failed; retrying');
      }
    }
  }

  /** Resolves when `client` ends, or stops answering a probe, or the bus closes. */
  async #holdUntilLost(client: pg.Client): Promise<void> {
    const ended = new Promise<void>((resolve) => client.once('end', () => resolve()));
    while (!this.#closed) {
      const probe = client.query('SELECT 1').then(() => 'ok' as const, () => 'lost' as const);
      const outcome = await Promise.race([ended.then(() => 'lost' as const), probe, sleep(PROBE_MS * 2).then(() => 'lost' as const)]);
      if (outcome === 'lost') break;
      if ((await Promise.race([ended.then(() => 'lost' as const), this.#pause(PROBE_MS).then(() => 'ok' as const)])) === 'lost') break;
    }
    // A connection that stopped answering may never acknowledge the end either.
    await Promise.race([client.end().catch(() => {}), sleep(1000)]);
  }

  #setClient(client: pg.Client | undefined): void {
    const was = this.#client !== undefined;
    this.#client = client;
    this.#notifier.attach(client);
    if (was === (client !== undefined)) return;
    this.#states.emit('state', client !== undefined);
    // Anything may have been committed while we were away: everyone looks again.
    if (client) this.#wakes.emit('*');
  }

  /** Sleeps `ms`, or less when the bus closes. */
  async #pause(ms: number): Promise<void> {
    const controller = new AbortController();
    this.#sleep = controller;
    await sleep(ms, controller.signal);
    this.#sleep = undefined;
  }

  #dispatch(channel: string, payload: string): void {
    if (channel === TICKETS_CHANNEL) {
      this.#wakes.emit(`ticket:${payload}`);
      return;
    }
    if (channel === TICKET_ENDED_CHANNEL) {
      this.#wakes.emit(`ticket-ended:${payload}`);
      return;
    }
    if (channel === RUN_ENDED_CHANNEL) {
      this.#ends.emit('ended', payload);
      this.#wakes.emit(`run-ended:${payload}`);
      return;
    }
    if (channel === POLICY_CHANNEL) {
      this.#wakes.emit('policy');
      return;
    }
    if (channel === ASSEMBLIES_CHANNEL) {
      this.#wakes.emit('assemblies');
      return;
    }
    if (channel === TOOLS_CHANNEL) {
      this.#wakes.emit('tools');
      return;
    }
    if (channel === CANCEL_CHANNEL) {
      this.#cancels.emit(payload, payload);
      return;
    }
    const [sessionId, runId, , sessionHead, runSeq, origin] = payload.split(' ');
    // This process committed it and hands the batch to its watchers itself.
    if (origin === this.origin) return;
    this.#wakes.emit(`run:${runId}`, positionOf(runSeq));
    this.#wakes.emit(`session:${sessionId}`, positionOf(sessionHead));
  }

  /**
   * Hands a batch of one run's events, just committed by this process with no
   * notification, to its watchers here, then wakes its waiters (WakeWatch) as
   * a notification would have: a watcher the batch has reached passes the
   * wake-up over. Then announces the batch to the other processes.
   */
  publish(events: StoredEvent[]): void {
    const first = events[0];
    const last = events.at(-1);
    if (!first || !last) return;
    this.#batches.emit(`run:${first.runId}`, events);
    this.#batches.emit(`session:${first.sessionId}`, events);
    this.#wakes.emit(`run:${first.runId}`, last.seq);
    this.#wakes.emit(`session:${first.sessionId}`, last.sessionSeq);
    this.#announce(first, last);
  }

  /**
   * A notification of a run's events, as abc_append_events sends one:
   * `session run last-id session-head run-seq origin`; without `last`, with
   * no positions (watchers elsewhere read the log).
   */
  #announce(run: { runId: string; sessionId: string }, last?: StoredEvent): void {
    const positions = last ? `${last.id} ${last.sessionSeq ?? ''} ${last.seq}` : '  ';
    this.#notifier.announce(EVENTS_CHANNEL, `${run.sessionId} ${run.runId} ${positions} ${this.origin}`, run.runId);
  }

  /** Announces, after its commit, that a ticket's execution row changed (a TICKETS_CHANNEL notification), and that its lifecycle ended (TICKET_ENDED_CHANNEL). */
  announceTicket(ticket: string, ended = false): void {
    this.#notifier.announce(TICKETS_CHANNEL, ticket);
    if (ended) this.#notifier.announce(TICKET_ENDED_CHANNEL, ticket);
  }

  /**
   * Runs `write`, a commit of `run`'s events that sends no notification (it is
   * given this bus's origin), and publishes the events it answers with; with
   * `ends`, a commit that ends the run, whose end it announces too
   * (RUN_ENDED_CHANNEL). A write that fails may have committed all the same:
   * the run's and its session's watchers here and elsewhere read the log.
   */
  async deliver<T extends { events: StoredEvent[] }>(run: { runId: string; sessionId: string }, write: (origin: string) => Promise<T | undefined>, ends = false): Promise<T | undefined> {
    let written: T | undefined;
    try {
      written = await write(this.origin);
    } catch (error) {
      this.reread(run.runId, run.sessionId);
      this.#announce(run);
      if (ends) this.#notifier.announce(RUN_ENDED_CHANNEL, run.runId);
      throw error;
    }
    if (written) {
      this.publish(written.events);
      if (ends) this.#notifier.announce(RUN_ENDED_CHANNEL, run.runId);
    }
    return written;
  }

  /**
   * Has this process's watchers of a run and of its session read the log: a
   * write whose events this process meant to hand them failed, and may have
   * committed all the same.
   */
  reread(runId: string, sessionId: string): void {
    this.#wakes.emit(`run:${runId}`);
    this.#wakes.emit(`session:${sessionId}`);
  }

  /** Calls `fn` with each batch of `key`'s events (`run:ID` or `session:ID`) this process commits. */
  onBatch(key: string, fn: (events: StoredEvent[]) => void): () => void {
    this.#batches.on(key, fn);
    return () => this.#batches.off(key, fn);
  }

  /**
   * Calls `fn` whenever events of `key` (`run:ID`, `session:ID` or `ticket:ID`)
   * may have been committed, or when a ticket or a run ended (`ticket-ended:ID`,
   * `run-ended:ID`); with
   * the run's seq or the session's head they reached when the notification
   * says it.
   */
  onWake(key: string, fn: (position?: number) => void): () => void {
    this.#wakes.on(key, fn);
    this.#wakes.on('*', fn);
    return () => {
      this.#wakes.off(key, fn);
      this.#wakes.off('*', fn);
    };
  }

  /** Calls `fn` with the id of every run that ends, in any process. */
  onRunEnded(fn: (runId: string) => void): () => void {
    this.#ends.on('ended', fn);
    return () => this.#ends.off('ended', fn);
  }

  /** Calls `fn` when a cancel of `id` (a run or a ticket) is announced by any process. */
  onCancel(id: string, fn: () => void): () => void {
    this.#cancels.on(id, fn);
    return () => this.#cancels.off(id, fn);
  }

  async close(): Promise<void> {
    await this.#notifier.drain(1000);
    this.#closed = true;
    this.#sleep?.abort();
    await this.#client?.end().catch(() => {});
    await this.#loop;
  }
}
