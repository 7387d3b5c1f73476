// Reads the first `count` SSE events of a streaming response, then aborts it.
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import type { TestResponse } from './gateway.js';

export async function readSse(res: TestResponse, count: number, controller: AbortController): Promise<EventSourceMessage[]> {
  const events: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (e) => events.push(e) });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  while (events.length < count) {
    const { done, value } = await reader.read();
    if (done) break;
    parser.feed(decoder.decode(value, { stream: true }));
  }
  controller.abort();
  return events.slice(0, count);
}
