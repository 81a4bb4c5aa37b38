import type { ApprovalResponse, PublicAction } from '../../actions/approval-service.js'
import { type Html, html } from '../html.js'
import { jsonTree } from '../json-tree.js'
import { csrfField, layout, type Notice, when } from '../layout.js'
import type { ParamChange } from '../params-diff.js'
import type { PortalSession } from '../portal-sessions.js'
import { visible } from '../visible-text.js'

export function approvalsPage(session: PortalSession, actions: PublicAction[], notice?: Notice): Html {
  const rows = actions.map(
    (a) => html`<tr>
<td><a href="/portal/approvals/${a.actionId}">${a.actionId}</a></td>
<td>${a.verb}</td><td>${a.systemId}</td>
<td>${a.request ? html`<code>${visible(a.request.method)} ${visible(a.request.path)}</code>` : html`<code>${visible(a.tool)}</code>`}</td>
<td>${a.target === null ? '—' : visible(a.target)}</td><td>${a.principalId}</td><td>${when(a.expiresAt)}</td></tr>`,
  )
  return layout({
    title: 'Approvals',
    path: '/portal/approvals',
    session,
    notice,
    body:
      actions.length === 0
        ? html`<p>No write is waiting for approval.</p>`
        : html`<table class="receipts"><caption>Pending writes, oldest first</caption>
<thead><tr><th scope="col">action</th><th scope="col">verb</th><th scope="col">system</th><th scope="col">request</th><th scope="col">target</th><th scope="col">agent</th><th scope="col">expires</th></tr></thead>
<tbody>${rows}</tbody></table>`,
  })
}

function requestView(a: PublicAction): Html {
  const r = a.request
  if (!r) {
    return html`<dl class="facts"><dt>Tool</dt><dd><code>${visible(a.tool)}</code></dd></dl>
<h3>Parameters</h3><div class="json" data-testid="params">${jsonTree(a.params)}</div>`
  }
  const body =
    r.bodyEncoding === 'json'
      ? html`<div class="json" data-testid="body">${jsonTree(r.body)}</div>`
      : r.bodyEncoding === 'text'
        ? html`<pre class="body" data-testid="body">${visible(String(r.body), { lines: true })}</pre>`
        : r.bodyEncoding === 'binary'
          ? html`<p>${r.contentEncoding === null ? 'Binary' : 'Encoded'} body, ${r.bodyBytes} bytes (not shown).</p>`
          : html`<p>No body.</p>`
  return html`<dl class="facts">
<dt>Method</dt><dd><code data-testid="method">${visible(r.method)}</code></dd>
<dt>System</dt><dd>${a.systemId}</dd>
<dt>Path</dt><dd><code data-testid="path">${visible(r.path)}</code></dd>
<dt>Content type</dt><dd>${r.contentType === null ? '—' : visible(r.contentType)}</dd>
${r.contentEncoding === null ? '' : html`<dt>Content encoding</dt><dd data-testid="encoding">${visible(r.contentEncoding)}</dd>`}
</dl><h3>Body</h3>${body}`
}

function diffView(diff: ParamChange[] | undefined): Html {
  if (!diff) return html``
  if (diff.length === 0) return html`<p role="status">The edits change nothing.</p>`
  return html`<table class="diff" data-testid="diff"><caption>What the edits change</caption>
<thead><tr><th scope="col">parameter</th><th scope="col">change</th><th scope="col">staged</th><th scope="col">approved</th></tr></thead>
<tbody>${diff.map(
    (
      c,
    ) => html`<tr class="${c.change}"><td><code>${visible(JSON.stringify(c.key))}</code></td><td>${c.change}</td>
<td>${c.before === undefined ? '—' : html`<del>${visible(JSON.stringify(c.before))}</del>`}</td>
<td>${c.after === undefined ? '—' : html`<ins>${visible(JSON.stringify(c.after))}</ins>`}</td></tr>`,
  )}</tbody></table>`
}

export function approvalPage(
  session: PortalSession,
  a: PublicAction,
  opts: { paramsText?: string; diff?: ParamChange[]; notice?: Notice } = {},
): Html {
  const editable = a.request === null
  return layout({
    title: `Approve ${a.verb}`,
    path: '/portal/approvals',
    session,
    notice: opts.notice,
    body: html`<section aria-labelledby="h-req"><h2 id="h-req">The write</h2>
<dl class="facts"><dt>Action</dt><dd><code>${a.actionId}</code></dd>
<dt>Verb</dt><dd>${a.verb}</dd><dt>Target</dt><dd>${a.target === null ? '—' : visible(a.target)}</dd>
<dt>Environment</dt><dd>${a.environment === null ? '—' : visible(a.environment)}</dd>
<dt>Agent</dt><dd>${a.principalId} (key ${a.keyId})</dd>
<dt>Staged</dt><dd>${when(a.createdAt)} (receipt <a href="/portal/audit/receipts/${a.stagedReceiptId}">${a.stagedReceiptId}</a>)</dd>
<dt>Expires</dt><dd>${when(a.expiresAt)}</dd></dl>
${requestView(a)}</section>
<section aria-labelledby="h-approve"><h2 id="h-approve">Approve</h2>
<form method="post" action="/portal/approvals/${a.actionId}/approve" class="card">${csrfField(session)}
${
  editable
    ? html`<label for="params">Parameter edits (JSON object, merged over the staged parameters; optional)</label>
<textarea id="params" name="params" rows="5" spellcheck="false">${opts.paramsText ?? ''}</textarea>
<button type="submit" formaction="/portal/approvals/${a.actionId}/preview" class="secondary">Show the changes</button>
${diffView(opts.diff)}`
    : html`<p class="hint">A request the proxy staged is replayed byte for byte: it cannot be edited.</p>`
}
<label for="totpCode">Authenticator or backup code</label>
<input id="totpCode" name="totpCode" type="text" inputmode="numeric" autocomplete="one-time-code" spellcheck="false">
<button type="submit">Approve and write</button>
</form>
<form method="post" action="/portal/approvals/${a.actionId}/dismiss" class="card">${csrfField(session)}
<label for="reason">Reason for refusing (optional)</label>
<input id="reason" name="reason" type="text" maxlength="500">
<button type="submit" class="danger">Deny: never write it</button>
</form></section>`,
  })
}

export function approvalResultPage(session: PortalSession, actionId: string, r: ApprovalResponse): Html {
  return layout({
    title: r.type === 'executed' ? 'Written' : r.type === 'denied' ? 'Not written' : 'Upstream error',
    path: '/portal/approvals',
    session,
    notice: { kind: r.type === 'executed' && r.result.ok ? 'ok' : 'error', text: r.message },
    body: html`<dl class="facts" data-testid="approval-result"><dt>Action</dt><dd><code>${actionId}</code></dd>
<dt>Outcome</dt><dd data-testid="outcome">${r.type}</dd>
<dt>Receipt</dt><dd><a href="/portal/audit/receipts/${r.receipt.receiptId}" data-testid="receipt">${r.receipt.receiptId}</a> (seq ${r.receipt.seq}, ${r.receipt.kind} ${r.receipt.decision ?? ''})</dd>
${r.receipt.outcomeReceiptId ? html`<dt>Outcome receipt</dt><dd><a href="/portal/audit/receipts/${r.receipt.outcomeReceiptId}">${r.receipt.outcomeReceiptId}</a></dd>` : ''}
${r.revertActionId ? html`<dt>Revert</dt><dd>${r.revertMessage ?? ''} <a href="/portal/approvals/${r.revertActionId}">${r.revertActionId}</a></dd>` : ''}
</dl><h2>Result</h2><div class="json">${jsonTree(r.result)}</div>
<p><a href="/portal/approvals">Back to approvals</a></p>`,
  })
}
