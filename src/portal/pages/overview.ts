import { barChart } from '../bar-chart.js'
import { type Html, html } from '../html.js'
import { layout, when } from '../layout.js'
import type { PortalSession } from '../portal-sessions.js'

export interface OverviewData {
  byDecision: { ALLOW: number; DENY: number; STEP_UP: number; REVOKE: number }
  truncated: boolean
  /** Gated writes per UTC day, oldest first. */
  gatedByDay: { day: string; count: number }[]
  checkpoint: { seq: number; hash: string; at: number } | null
  verification: {
    valid: boolean
    checked: number
    headSeq: number
    firstInvalidSeq?: number
    reason?: string
  }
  pendingApprovals: number
}

export function overviewPage(session: PortalSession, d: OverviewData): Html {
  const v = d.verification
  return layout({
    title: 'Overview',
    path: '/portal',
    session,
    body: html`<section aria-labelledby="h-decisions"><h2 id="h-decisions">Decisions, last 24 hours</h2>
${barChart(
  'Decisions in the last 24 hours',
  [
    { label: 'ALLOW', value: d.byDecision.ALLOW },
    { label: 'DENY', value: d.byDecision.DENY },
    { label: 'STEP_UP', value: d.byDecision.STEP_UP },
    { label: 'REVOKE', value: d.byDecision.REVOKE },
  ],
  { height: 180 },
)}
${d.truncated ? html`<p class="hint">More than the counted window: the counts are a floor.</p>` : ''}
</section>
<section aria-labelledby="h-gated"><h2 id="h-gated">Gated writes, last 30 days</h2>
${barChart(
  'Gated writes per day, last 30 days',
  d.gatedByDay.map((g) => ({ label: g.day, value: g.count })),
)}
</section>
<section aria-labelledby="h-log"><h2 id="h-log">Audit log</h2>
<dl class="facts">
<dt>Log verifies</dt><dd data-testid="log-valid">${
      v.valid
        ? html`<span class="good">yes</span>, ${v.checked} receipts checked up to seq ${v.headSeq}`
        : html`<span class="bad">NO</span>: first invalid seq ${v.firstInvalidSeq ?? '?'} (${v.reason ?? 'unknown'})`
    }</dd>
<dt>Last checkpoint</dt><dd>${
      d.checkpoint
        ? html`seq ${d.checkpoint.seq} at ${when(d.checkpoint.at)}, <code>${d.checkpoint.hash}</code>`
        : 'none yet'
    }</dd>
<dt>Pending approvals</dt><dd><a href="/portal/approvals">${d.pendingApprovals}</a></dd>
</dl></section>`,
  })
}
