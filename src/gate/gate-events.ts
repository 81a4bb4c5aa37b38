import type { Decision } from '../core/evaluate.js'

/**
 * What the gate reports about itself. Metrics stay out of the core and the gate: one
 * module (observability/metrics.ts) turns these events into prom-client series.
 */
export interface GateEvents {
  decided(e: { decision: Decision; verb: string; system: string | null; decideSeconds: number }): void
  commitRetried(e: { tenantId: string }): void
  failedClosed(e: { reason: string }): void
}

export const silentGateEvents: GateEvents = {
  decided: () => {},
  commitRetried: () => {},
  failedClosed: () => {},
}
