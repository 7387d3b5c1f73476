// A small OTLP/HTTP trace receiver: it decodes what exporters send to
// /v1/traces (protobuf, or JSON) into plain spans the tests can read.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import protobuf from 'protobufjs';

export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** 1 internal, 2 server, 3 client. */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, unknown>;
  events: string[];
  links: { traceId: string; spanId: string }[];
  /** 0 unset, 1 ok, 2 error. */
  status: number;
}

export interface OtlpReceiver {
  /** The base URL, for OTEL_EXPORTER_OTLP_ENDPOINT. */
  url: string;
  spans: ReceivedSpan[];
  /** Content types of the requests received. */
  contentTypes: string[];
  close(): Promise<void>;
}

const root = protobuf.loadSync(path.join(import.meta.dirname, '../fixtures/otlp/trace.proto'));
const Request = root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const contentTypes: string[] = [];
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    if (req.method !== 'POST' || req.url !== '/v1/traces') return void res.writeHead(404).end();
    const type = String(req.headers['content-type'] ?? '');
    contentTypes.push(type);
    const body = Buffer.concat(chunks);
    const json = type.startsWith('application/json');
    const decoded = json ? JSON.parse(body.toString('utf8')) : Request.toObject(Request.decode(body), { longs: String, bytes: Buffer });
    spans.push(...fromRequest(decoded, json));
    res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' }).end(json ? '{}' : Buffer.alloc(0));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    contentTypes,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

type Raw = Record<string, any>;

function fromRequest(request: Raw, json: boolean): ReceivedSpan[] {
  // OTLP/JSON spells ids in hex and fields in lowerCamelCase, as protobufjs's objects do.
  const id = (v: unknown) => (v === undefined || v === null ? '' : json ? String(v).toLowerCase() : (v as Buffer).toString('hex'));
  const out: ReceivedSpan[] = [];
  for (const rs of request.resourceSpans ?? []) {
    const resource = attributesOf(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          service: String(resource['service.name'] ?? ''),
          traceId: id(s.traceId),
          spanId: id(s.spanId),
          parentSpanId: id(s.parentSpanId),
          name: s.name,
          kind: Number(s.kind ?? 0),
          startNs: BigInt(s.startTimeUnixNano ?? 0),
          endNs: BigInt(s.endTimeUnixNano ?? 0),
          attributes: attributesOf(s.attributes),
          events: (s.events ?? []).map((e: Raw) => e.name),
          links: (s.links ?? []).map((l: Raw) => ({ traceId: id(l.traceId), spanId: id(l.spanId) })),
          status: Number(s.status?.code ?? 0),
        });
      }
    }
  }
  return out;
}

function attributesOf(list: Raw[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, valueOf(kv.value)]));
}

function valueOf(v: Raw | undefined): unknown {
  if (!v) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(valueOf);
  return undefined;
}
