// Rows -> generated messages, shared by the planes.
import type { Event } from '../../gen/abc/common/v1/types.js';
import type { StoredEvent } from '../store/event-log.js';

export const toEventMessage = (e: StoredEvent): Event => ({
  eventId: e.eventId,
  runId: e.runId,
  sessionId: e.sessionId,
  seq: e.seq,
  cursor: e.id,
  ts: e.ts,
  type: e.type,
  payload: e.payload,
});

export const millis = (d: Date | null | undefined) => (d ? d.getTime() : 0);

/** `FOO` -> the generated string enum member `PREFIX_FOO`. */
export const enumOf = <E extends string>(prefix: string, value: string) => `${prefix}_${value.toUpperCase()}` as E;
