// An IM client over the gRPC Connect stream, with helpers to await frames.
import type { ClientDuplexStream } from '@grpc/grpc-js';
import { ConnectRequest, type ConnectResponse } from '../../gen/abc/ingress/v1/ingress.js';
import type { CoreClients } from '../../gateway/core-client.js';

type ClientFrame = NonNullable<ConnectRequest['frame']>;
type ServerFrame = NonNullable<ConnectResponse['frame']>;
type FrameValue<K extends ServerFrame['$case']> = Extract<ServerFrame, { $case: K }>['value'];

export class ImClient {
  /** Every frame, a batch's frames each in its place. */
  readonly frames: ConnectResponse[] = [];
  /** Every message as it came: a batch is one. */
  readonly messages: ConnectResponse[] = [];
  ended = false;
  readonly #stream: ClientDuplexStream<ConnectRequest, ConnectResponse>;
  readonly #waiters: (() => void)[] = [];

  constructor(clients: CoreClients) {
    this.#stream = clients.ingress.connect();
    this.#stream.on('data', (message: ConnectResponse) => {
      this.messages.push(message);
      this.frames.push(...(message.frame?.$case === 'batch' ? message.frame.value.frames : [message]));
      this.#waiters.splice(0).forEach((w) => w());
    });
    const end = () => {
      this.ended = true;
      this.#waiters.splice(0).forEach((w) => w());
    };
    this.#stream.on('end', end);
    this.#stream.on('error', end);
  }

  send(frame: ClientFrame, common: Partial<Pick<ConnectRequest, 'requestId' | 'sessionId' | 'runId'>> = {}): void {
    this.#stream.write(ConnectRequest.fromPartial({ ts: Date.now(), ...common, frame }));
  }

  hello(apiKey: string, userId = 'u1', batchFrames = false): void {
    this.send({ $case: 'hello', value: { apiKey, userId, clientMeta: { app: 'test' }, excludeEvents: [], traceparent: '', batchFrames } });
  }

  /** Waits until `predicate` holds for the frames so far. */
  async until(predicate: (frames: ConnectResponse[]) => boolean, timeoutMs = 10_000): Promise<ConnectResponse[]> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this.frames)) {
      if (this.ended) throw new Error(`stream ended; frames: ${JSON.stringify(this.frames.map((f) => f.frame?.$case))}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out; frames: ${JSON.stringify(this.frames.map((f) => f.frame?.$case))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.frames;
  }

  /** The first frame of `kind` after index `from`. */
  async next(kind: ServerFrame['$case'], from = 0): Promise<ConnectResponse> {
    await this.until((f) => f.slice(from).some((x) => x.frame?.$case === kind));
    return this.frames.slice(from).find((x) => x.frame?.$case === kind)!;
  }

  /** Every frame of `kind`, with its body as `value`. */
  of<K extends ServerFrame['$case']>(kind: K): (ConnectResponse & { value: FrameValue<K> })[] {
    return this.frames.filter((f) => f.frame?.$case === kind).map((f) => ({ ...f, value: f.frame!.value as FrameValue<K> }));
  }

  /** The text of every delta frame so far, in order: a frame may carry several of the agent's deltas. */
  text(): string {
    return this.of('delta').map((d) => d.value.text).join('');
  }

  /** Ends this side of the stream, as the gateway does when its socket closes; resolves with the call's status. */
  halfClose(): Promise<{ code: number; details: string }> {
    const status = new Promise<{ code: number; details: string }>((resolve) => this.#stream.once('status', resolve));
    this.#stream.end();
    return status;
  }

  close(): void {
    this.#stream.cancel();
  }
}
