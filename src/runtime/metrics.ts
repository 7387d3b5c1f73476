// The core's Prometheus metrics (prom-client), one registry per process.
// Labels stay bounded: methods, statuses, tool and model names, outcomes;
// never an id, a tenant or a user.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

export const registry = new Registry();
collectDefaultMetrics({ register: registry, prefix: 'abc_core_' });

const registers = [registry];
const SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

export const metrics = {
  rpcRequests: new Counter({ name: 'abc_rpc_requests_total', help: 'gRPC calls the core answered, by method and status code', labelNames: ['method', 'code'], registers }),
  rpcDuration: new Histogram({ name: 'abc_rpc_duration_seconds', help: 'Duration of gRPC calls (a stream: until it ends), by method', labelNames: ['method'], buckets: SECONDS, registers }),
  runsStarted: new Counter({ name: 'abc_runs_started_total', help: 'Runs started', registers }),
  runsFinished: new Counter({ name: 'abc_runs_finished_total', help: 'Runs that ended, by status (DONE, FAILED, CANCELLED)', labelNames: ['status'], registers }),
  runDuration: new Histogram({ name: 'abc_run_duration_seconds', help: 'From a run’s start to its end, by status', labelNames: ['status'], buckets: SECONDS, registers }),
  toolCalls: new Counter({ name: 'abc_tool_calls_total', help: 'Tool calls that ended, by tool and outcome', labelNames: ['tool', 'outcome'], registers }),
  approvalWait: new Histogram({ name: 'abc_approval_wait_seconds', help: 'From an approval’s request to its decision or expiry, by outcome', labelNames: ['outcome'], buckets: SECONDS, registers }),
  llmCalls: new Counter({ name: 'abc_llm_calls_total', help: 'LLM proxy calls, by model, API and outcome', labelNames: ['model', 'api', 'outcome'], registers }),
  llmTokens: new Counter({ name: 'abc_llm_tokens_total', help: 'Tokens the LLM router reported, by model and kind (prompt, completion)', labelNames: ['model', 'kind'], registers }),
  llmTtft: new Histogram({ name: 'abc_llm_time_to_first_token_seconds', help: 'Time to the first streamed chunk, by model', labelNames: ['model'], buckets: SECONDS, registers }),
  eventAppend: new Histogram({ name: 'abc_event_append_seconds', help: 'Duration of one event-log append (one statement)', buckets: SECONDS, registers }),
  eventBatch: new Histogram({ name: 'abc_event_append_batch_size', help: 'Events per event-log append', buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500], registers }),
  liveSubscribers: new Gauge({ name: 'abc_live_subscribers', help: 'Event streams being watched now (IM, SSE, gRPC)', registers }),
};

/** Gauges read when scraped (queue depth, pool use), set by whoever can read them. */
export function scrapedGauge(name: string, help: string, labelNames: string[], read: (set: (labels: Record<string, string>, value: number) => void) => Promise<void> | void): Gauge {
  // The newest reader wins (several cores in one process: tests).
  registry.removeSingleMetric(name);
  const gauge: Gauge = new Gauge({
    name,
    help,
    labelNames,
    registers,
    async collect() {
      gauge.reset();
      await read((labels, value) => gauge.set(labels, value));
    },
  });
  return gauge;
}
