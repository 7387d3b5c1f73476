import { describe, expect, it } from 'vitest';
import { InFlight } from '../../src/runtime/in-flight.js';

/** Work that ends when its signal aborts, if `obeys`; otherwise never. */
function work(signal: AbortSignal, obeys: boolean): Promise<void> {
  return new Promise((resolve) => {
    if (obeys) signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

describe('in-flight work at shutdown', () => {
  it('waits for work that ends within the grace period', async () => {
    const jobs = new InFlight();
    let ended = false;
    jobs.track(new Promise((r) => setTimeout(r, 20)).then(() => (ended = true)));
    expect(await jobs.drain(5_000)).toEqual([]);
    expect(ended).toBe(true);
  });

  it('aborts work still going after the grace period, with the reason, and waits for it to end', async () => {
    const jobs = new InFlight();
    const controller = new AbortController();
    jobs.track(work(controller.signal, true), controller, 'run-1');
    const reason = new Error('shutting down');
    expect(await jobs.drain(10, reason, 5_000)).toEqual([]);
    expect(controller.signal.reason).toBe(reason);
    expect(jobs.keys()).toEqual([]);
  });

  it('gives up on work that ignores its abort, and names it', async () => {
    const jobs = new InFlight();
    const obeying = new AbortController();
    const ignoring = new AbortController();
    jobs.track(work(obeying.signal, true), obeying, 'obeys');
    jobs.track(work(ignoring.signal, false), ignoring, 'ignores');
    expect(await jobs.drain(10, new Error('stop'), 50)).toEqual(['ignores']);
    expect(ignoring.signal.aborted).toBe(true);
  });
});
