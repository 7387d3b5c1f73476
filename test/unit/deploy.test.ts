// The files in deploy/ and the Dockerfile against ABC itself (no container
// engine runs here): every variable they set is one ABC reads, every command
// one it has, every port and probe path one it serves, every metric the
// Grafana dashboard queries one it exposes.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { OTEL_VARIABLES } from '../../src/runtime/tracing.js';
import { describe, expect, it } from 'vitest';

const source = ['src/runtime/metrics.ts', 'src/main/metrics.ts', 'gateway/metrics.ts'].map((f) => readFileSync(f, 'utf8')).join('\n');
/** Names ABC registers, with the series a histogram adds. */
const exposed = new Set(
  [...source.matchAll(/name: '(abc_[a-z_]+)'|scrapedGauge\('(abc_[a-z_]+)'/g)].flatMap((m) => {
    const name = (m[1] ?? m[2])!;
    return [name, `${name}_bucket`, `${name}_sum`, `${name}_count`];
  }),
);
/** prom-client's process metrics under each prefix. */
const processMetric = /^abc_(core|gateway)_(process_|nodejs_)/;

describe('the Grafana dashboard', () => {
  const dashboard = JSON.parse(readFileSync('deploy/grafana/abc-dashboard.json', 'utf8')) as { panels: { title: string; targets: { expr: string }[] }[] };

  it('queries only metrics ABC exposes', () => {
    const queried = dashboard.panels.flatMap((p) => p.targets.flatMap((t) => [...t.expr.matchAll(/\b(abc_[a-z0-9_]+)/g)].map((m) => m[1]!)));
    expect(queried.length).toBeGreaterThan(20);
    expect(queried.filter((name) => !exposed.has(name) && !processMetric.test(name))).toEqual([]);
  });

  it('has a panel for each family of metrics', () => {
    const text = JSON.stringify(dashboard);
    for (const name of ['abc_http_requests_total', 'abc_rpc_requests_total', 'abc_runs_finished_total', 'abc_tool_calls_total', 'abc_approval_wait_seconds', 'abc_llm_tokens_total', 'abc_event_append_seconds', 'abc_live_subscribers', 'abc_contract_queue_depth', 'abc_db_pool_connections']) {
      expect(text, name).toContain(name);
    }
  });
});

/** Every variable ABC's configuration reads (src/config.ts). */
const CONFIG = readFileSync('src/config.ts', 'utf8');
const VARIABLES = new Set([...CONFIG.matchAll(/(?:read(?:<[^>]*>)?|ms)\('([A-Z0-9_]+)'/g)].map((m) => m[1]!).concat(OTEL_VARIABLES));
const COMMANDS = ['serve', 'core', 'gateway', 'migrate'];
const HEALTH_ROUTES = [...readFileSync('gateway/routes/health.ts', 'utf8').matchAll(/app\.get\('([^']+)'/g)].map((m) => m[1]!);
const portOf = (addr: string) => Number(addr.split(':').at(-1));

type Doc = Record<string, any>;
const k8s: Doc[] = readdirSync('deploy/k8s').flatMap((f) => parseAllDocuments(readFileSync(path.join('deploy/k8s', f), 'utf8')).map((d) => d.toJS() as Doc));
const ofKind = (kind: string) => k8s.filter((d) => d.kind === kind);

describe('deploy/compose.yaml', () => {
  const compose = parse(readFileSync('deploy/compose.yaml', 'utf8'), { merge: true }) as { services: Record<string, Doc> };
  const abc = Object.entries(compose.services).filter(([, s]) => s.image === 'abc:latest');

  it('runs ABC commands with only variables ABC reads', () => {
    expect(abc.map(([name]) => name).sort()).toEqual(['core-1', 'core-2', 'gateway-1', 'gateway-2', 'migrate']);
    for (const [name, service] of abc) {
      expect(COMMANDS, name).toContain(service.command[0]);
      expect(Object.keys(service.environment).filter((v) => !VARIABLES.has(v)), name).toEqual([]);
    }
  });

  it('wires the ports the processes listen on: gateways to cores, Prometheus to the metrics port', () => {
    for (const [name, service] of abc.filter(([, s]) => s.command[0] === 'gateway')) {
      const core = service.command[service.command.indexOf('--core') + 1] as string;
      const target = compose.services[core.split(':')[0]!]!;
      expect(portOf(target.environment.ABC_GRPC_ADDR), name).toBe(portOf(core));
      expect(service.ports[0].split(':')[1], name).toBe(String(portOf(service.environment.ABC_HTTP_ADDR)));
    }
    const prometheus = parse(readFileSync('deploy/prometheus.yml', 'utf8')) as Doc;
    for (const target of prometheus.scrape_configs[0].static_configs[0].targets as string[]) {
      expect(portOf(compose.services[target.split(':')[0]!]!.environment.ABC_METRICS_ADDR)).toBe(portOf(target));
    }
    expect(compose.services.migrate!.depends_on.postgres.condition).toBe('service_healthy');
    expect(compose.services['core-1']!.depends_on.migrate.condition).toBe('service_completed_successfully');
  });
});

describe('deploy/k8s', () => {
  const deployments = ofKind('Deployment');

  it('runs ABC commands with only variables ABC reads', () => {
    const config = ofKind('ConfigMap')[0]!.data as Record<string, string>;
    const secret = ofKind('Secret')[0]!.stringData as Record<string, string>;
    expect([...Object.keys(config), ...Object.keys(secret)].filter((v) => !VARIABLES.has(v))).toEqual([]);
    for (const workload of [...deployments, ...ofKind('Job')]) {
      const container = workload.spec.template.spec.containers[0];
      expect(COMMANDS, workload.metadata.name).toContain(container.args[0]);
      expect((container.env ?? []).map((e: Doc) => e.name).filter((v: string) => !VARIABLES.has(v))).toEqual([]);
      expect(container.envFrom).toEqual([{ configMapRef: { name: 'abc-config' } }, { secretRef: { name: 'abc-secrets' } }]);
      expect(container.resources.requests, workload.metadata.name).toBeDefined();
      expect(workload.spec.template.spec.securityContext.runAsNonRoot).toBe(true);
    }
  });

  it('probes what ABC serves, on the ports it listens on', () => {
    for (const d of deployments) {
      const container = d.spec.template.spec.containers[0];
      const ports = Object.fromEntries(container.ports.map((p: Doc) => [p.name, p.containerPort]));
      const env = Object.fromEntries((container.env as Doc[]).map((e) => [e.name, e.value]));
      for (const probe of [container.readinessProbe, container.livenessProbe]) {
        if (probe.httpGet) {
          expect(HEALTH_ROUTES).toContain(probe.httpGet.path);
          expect(ports[probe.httpGet.port]).toBe(portOf(env.ABC_HTTP_ADDR));
        } else {
          expect(probe.grpc.port).toBe(portOf(env.ABC_GRPC_ADDR));
        }
      }
      if (env.ABC_METRICS_ADDR) expect(ports.metrics).toBe(portOf(env.ABC_METRICS_ADDR));
    }
  });

  it('points Services, disruption budgets and autoscalers at the Deployments', () => {
    const byName = new Map(deployments.map((d) => [d.metadata.name, d]));
    for (const s of ofKind('Service')) {
      const d = byName.get(s.metadata.name)!;
      expect(d.spec.template.metadata.labels).toMatchObject(s.spec.selector);
      const named = d.spec.template.spec.containers[0].ports.map((p: Doc) => p.name);
      for (const port of s.spec.ports) expect(named).toContain(port.targetPort);
    }
    expect(ofKind('Service').find((s) => s.metadata.name === 'abc-core')!.spec.ports.find((p: Doc) => p.name === 'grpc').port).toBe(portOf(ofKind('ConfigMap')[0]!.data.ORCHESTRATOR_URL));
    for (const pdb of ofKind('PodDisruptionBudget')) expect(byName.get(pdb.metadata.name)!.spec.template.metadata.labels).toMatchObject(pdb.spec.selector.matchLabels);
    for (const hpa of ofKind('HorizontalPodAutoscaler')) expect(byName.has(hpa.spec.scaleTargetRef.name)).toBe(true);
  });
});

describe('the Dockerfile', () => {
  const dockerfile = readFileSync('Dockerfile', 'utf8');

  it('runs abc as an unprivileged user, under tini as PID 1, from a multi-stage build', () => {
    expect(dockerfile.match(/^FROM /gm)).toHaveLength(2);
    expect(dockerfile).toMatch(/^USER node$/m);
    expect(dockerfile).toMatch(/^ENTRYPOINT \["\/usr\/bin\/tini", "--", "node", "\/app\/bin\/abc\.js"\]$/m);
    expect(dockerfile).toMatch(/^EXPOSE 8080 50051 9464$/m);
  });

  it('copies every directory ABC needs at run time', () => {
    const copied = [...dockerfile.matchAll(/^COPY (?!--)(\S+) \S+$/gm)].map((m) => m[1]!);
    for (const dir of ['bin', 'src', 'gateway', 'gen', 'packs', 'contracts', 'assemblies', 'workflows']) {
      expect(copied).toContain(dir);
      expect(existsSync(dir), dir).toBe(true);
    }
  });
});
