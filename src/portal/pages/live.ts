import { type Html, html } from '../html.js'
import { layout } from '../layout.js'
import type { PortalSession } from '../portal-sessions.js'

/**
 * Receipts as they happen. portal.js opens /portal/live/stream (SSE, the same gap-free stream
 * as /v1/receipts/stream) and adds rows with textContent only; the filters apply in the page.
 */
export function livePage(session: PortalSession, since: number): Html {
  return layout({
    title: 'Live decisions',
    path: '/portal/live',
    session,
    body: html`<form class="filters" id="live-filters" data-since="${since}" role="search" aria-label="Filter decisions">
<label for="f-decision">Decision</label>
<select id="f-decision" name="decision"><option value="">any</option><option>ALLOW</option><option>DENY</option><option>STEP_UP</option><option>REVOKE</option></select>
<label for="f-verb">Verb</label><input id="f-verb" name="verb" type="text">
<label for="f-principal">Principal</label><input id="f-principal" name="principal" type="text">
<label for="f-system">System</label><input id="f-system" name="system" type="text">
</form>
<p id="live-status" role="status">Connecting…</p>
<table class="receipts" id="live-table"><caption>Newest first</caption>
<thead><tr><th scope="col">seq</th><th scope="col">time</th><th scope="col">kind</th><th scope="col">decision</th><th scope="col">verb</th><th scope="col">target</th><th scope="col">principal</th><th scope="col">system</th><th scope="col">reason</th></tr></thead>
<tbody></tbody></table>`,
  })
}
