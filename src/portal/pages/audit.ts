import type { Receipt } from '../../core/receipt.js'
import { type Html, html } from '../html.js'
import { jsonTree } from '../json-tree.js'
import { layout, when } from '../layout.js'
import type { PortalSession } from '../portal-sessions.js'
import { visible } from '../visible-text.js'

export interface ReceiptQuery {
  kind?: string | undefined
  decision?: string | undefined
  verb?: string | undefined
  principal?: string | undefined
  system?: string | undefined
  text?: string | undefined
}

export interface VerifyView {
  valid: boolean
  checked: number
  headSeq: number
  firstInvalidSeq?: number | undefined
  reason?: string | undefined
}

export function systemOf(r: Receipt): string | null {
  const s = r.detail.systemId
  return typeof s === 'string' ? s : null
}

function receiptRows(receipts: Receipt[]): Html {
  return html`${receipts.map(
    (
      r,
    ) => html`<tr><td><a href="/portal/audit/receipts/${r.receiptId}">${r.seq}</a></td><td>${when(r.createdAt)}</td>
<td>${r.kind}</td><td>${r.decision ?? '—'}</td><td>${r.verb ?? '—'}</td><td>${r.target === null ? '—' : visible(r.target)}</td>
<td>${visible(r.principalName ?? r.principalId ?? '—')}</td><td>${systemOf(r) ?? '—'}</td><td>${r.reason ?? '—'}</td></tr>`,
  )}`
}

export function auditPage(
  session: PortalSession,
  opts: { query: ReceiptQuery; results: Receipt[]; scanned: number; headSeq: number; verify?: VerifyView },
): Html {
  const q = opts.query
  const v = opts.verify
  return layout({
    title: 'Audit',
    path: '/portal/audit',
    session,
    body: html`<section aria-labelledby="h-search"><h2 id="h-search">Search receipts</h2>
<form method="get" action="/portal/audit" class="filters" role="search" aria-label="Search receipts">
<label for="q-kind">Kind</label><input id="q-kind" name="kind" type="text" value="${q.kind ?? ''}">
<label for="q-decision">Decision</label><input id="q-decision" name="decision" type="text" value="${q.decision ?? ''}">
<label for="q-verb">Verb</label><input id="q-verb" name="verb" type="text" value="${q.verb ?? ''}">
<label for="q-principal">Principal</label><input id="q-principal" name="principal" type="text" value="${q.principal ?? ''}">
<label for="q-system">System</label><input id="q-system" name="system" type="text" value="${q.system ?? ''}">
<label for="q-text">Target or reason contains</label><input id="q-text" name="text" type="text" value="${q.text ?? ''}">
<button type="submit">Search</button></form>
<p class="hint">${opts.results.length} matches among the newest ${opts.scanned} receipts (head seq ${opts.headSeq}).</p>
<table class="receipts" data-testid="results"><caption>Newest first</caption>
<thead><tr><th scope="col">seq</th><th scope="col">time</th><th scope="col">kind</th><th scope="col">decision</th><th scope="col">verb</th><th scope="col">target</th><th scope="col">principal</th><th scope="col">system</th><th scope="col">reason</th></tr></thead>
<tbody>${receiptRows(opts.results)}</tbody></table></section>
<section aria-labelledby="h-verify"><h2 id="h-verify">Verify the chain</h2>
<form method="get" action="/portal/audit"><input type="hidden" name="verify" value="1"><button type="submit">Verify the whole log</button></form>
${
  v
    ? html`<p data-testid="verify-result" role="status">${
        v.valid
          ? html`<span class="good">The log verifies</span>: ${v.checked} receipts, head seq ${v.headSeq}.`
          : html`<span class="bad">The log does NOT verify</span>: first invalid seq ${v.firstInvalidSeq ?? '?'}, ${v.reason ?? ''}.`
      }</p>`
    : ''
}</section>
<section aria-labelledby="h-export"><h2 id="h-export">Export</h2>
<p>JSON Lines with a signed checkpoint of the head; check it offline with <code>writegate verify</code>.</p>
<a class="button" id="export-link" href="/portal/audit/export" data-lines="${opts.headSeq + 2}" download>Download the export</a>
<progress id="export-progress" max="${opts.headSeq + 2}" value="0" hidden aria-label="Export progress"></progress>
<span id="export-status" role="status"></span></section>`,
  })
}

export function receiptPage(session: PortalSession, r: Receipt): Html {
  return layout({
    title: `Receipt ${r.seq}`,
    path: '/portal/audit',
    session,
    body: html`<dl class="facts"><dt>Receipt</dt><dd><code>${r.receiptId}</code></dd><dt>Kind</dt><dd>${r.kind}</dd>
<dt>Decision</dt><dd>${r.decision ?? '—'}</dd><dt>Time</dt><dd>${when(r.createdAt)}</dd><dt>Hash</dt><dd><code>${r.hash}</code></dd>
<dt>Previous hash</dt><dd><code>${r.prevHash}</code></dd></dl><h2>Everything in it</h2><div class="json" data-testid="receipt-json">${jsonTree(r)}</div>`,
  })
}
