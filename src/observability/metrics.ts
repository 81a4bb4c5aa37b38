import { Counter, Gauge, Registry } from 'prom-client'
import type { GateEvents } from '../gate/gate-events.js'
import { HotCounter, HotHistogram } from './hot-path-metrics.js'

/**
 * The one module that turns what the gate, the proxy and the drain report into
 * Prometheus series. The core and the gate know nothing of prom-client.
 */
export interface Metrics {
  readonly registry: Registry
  readonly gateEvents: GateEvents
  /** End to end, from the request arriving to the decision committed. */
  observeGate(seconds: number): void
  observeUpstream(system: string, seconds: number): void
  /** Snapshot versions and their age, read at scrape time. */
  watchSnapshots(
    read: () => { tenantId: string; version: number; loadedAtMs: number }[],
    nowMs: () => number,
  ): void
  watchDrainBacklog(read: () => number): void
  /** Receipts the audit log's group commit stored, by path (see AppendPath). */
  auditAppended(path: string, receipts: number): void
  /** Whether this process can resolve a system's injected credential (1: it cannot). */
  credentialUnavailable(system: string, unavailable: boolean): void
  /** An intercepted TLS connection refused or cut: handshake failed or timed out, host outside the CA, Host mismatch. */
  tlsRefused(reason: string): void
  /** A CONNECT terminated by the proxy's interception CA. */
  tlsIntercepted(): void
  /** A connection on the TLS port tunnelled opaque (its SNI on the pass-through list). */
  tlsPassedThrough(): void
}

const LATENCY_BUCKETS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
]
const DECIDE_BUCKETS = [0.000005, 0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.005]

export function createMetrics(role: 'proxy' | 'control-plane' | 'embedded'): Metrics {
  const registry = new Registry()
  registry.setDefaultLabels({ component: role })
  // Touched on every gated request: the hot-path kinds (see hot-path-metrics.ts).
  const decisions = new HotCounter(registry, 'writegate_decisions_total', 'Committed decisions', [
    'decision',
    'verb',
    'system',
  ])
  const decide = new HotHistogram(
    registry,
    'writegate_decision_duration_seconds',
    'In-process decision time (core evaluation only)',
    DECIDE_BUCKETS,
  )
  const gate = new HotHistogram(
    registry,
    'writegate_gate_duration_seconds',
    'End-to-end gate time: request in to decision committed',
    LATENCY_BUCKETS,
  )
  const upstream = new HotHistogram(
    registry,
    'writegate_upstream_duration_seconds',
    'Upstream response time after ALLOW',
    LATENCY_BUCKETS,
    'system',
  )
  const failClosed = new Counter({
    name: 'writegate_fail_closed_total',
    help: 'Writes refused because the gate could not decide, and upstream answers withheld (credential_echoed, answer_compressed)',
    labelNames: ['reason'],
    registers: [registry],
  })
  const tlsRefused = new Counter({
    name: 'writegate_tls_refused_total',
    help: 'Intercepted TLS connections refused or cut, by reason',
    labelNames: ['reason'],
    registers: [registry],
  })
  const tlsPassedThrough = new Counter({
    name: 'writegate_tls_passed_through_total',
    help: 'Connections on the TLS port tunnelled opaque and ungated (SNI on proxy.passthrough)',
    registers: [registry],
  })
  const tlsIntercepted = new Counter({
    name: 'writegate_tls_intercepted_total',
    help: 'CONNECT tunnels to enrolled https upstreams terminated by the proxy',
    registers: [registry],
  })
  const retries = new Counter({
    name: 'writegate_commit_retries_total',
    help: 'Commits refused as stale and decided again',
    registers: [registry],
  })
  let snapshots: (() => { tenantId: string; version: number; loadedAtMs: number }[]) | undefined
  let clock: () => number = Date.now
  new Gauge({
    name: 'writegate_snapshot_version',
    help: 'Policy snapshot version held in process',
    labelNames: ['tenant'],
    registers: [registry],
    collect() {
      this.reset()
      for (const s of snapshots?.() ?? []) this.set({ tenant: s.tenantId }, s.version)
    },
  })
  new Gauge({
    name: 'writegate_snapshot_age_seconds',
    help: 'Seconds since the held snapshot was loaded',
    labelNames: ['tenant'],
    registers: [registry],
    collect() {
      this.reset()
      for (const s of snapshots?.() ?? []) this.set({ tenant: s.tenantId }, (clock() - s.loadedAtMs) / 1000)
    },
  })
  const credentials = new Gauge({
    name: 'writegate_credential_unavailable',
    help: 'Enrolled systems whose credential this process cannot resolve (1); their writes get 503 credential_unavailable',
    labelNames: ['system'],
    registers: [registry],
  })
  const auditAppends = new Counter({
    name: 'writegate_audit_appends_total',
    help: 'Receipts the group commit stored (or found already stored), by path: chained (one statement), transaction; stale or failed: fast-path attempts retried in a transaction',
    labelNames: ['path'],
    registers: [registry],
  })
  let backlog: (() => number) | undefined
  new Gauge({
    name: 'writegate_receipt_drain_backlog',
    help: 'Proxy receipts waiting to be drained into the audit log',
    registers: [registry],
    collect() {
      this.set(backlog?.() ?? 0)
    },
  })
  return {
    registry,
    gateEvents: {
      decided(e) {
        decisions.inc(e.decision, e.verb, e.system ?? '')
        decide.observe(e.decideSeconds)
      },
      commitRetried() {
        retries.inc()
      },
      failedClosed(e) {
        failClosed.inc({ reason: e.reason })
      },
    },
    observeGate: (s) => gate.observe(s),
    observeUpstream: (system, s) => upstream.observe(s, system),
    watchSnapshots(read, nowMs) {
      snapshots = read
      clock = nowMs
    },
    watchDrainBacklog(read) {
      backlog = read
    },
    auditAppended: (path, receipts) => auditAppends.inc({ path }, receipts),
    credentialUnavailable(system, unavailable) {
      credentials.set({ system }, unavailable ? 1 : 0)
    },
    tlsRefused: (reason) => tlsRefused.inc({ reason }),
    tlsIntercepted: () => tlsIntercepted.inc(),
    tlsPassedThrough: () => tlsPassedThrough.inc(),
  }
}
