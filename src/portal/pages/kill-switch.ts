import { type Html, html } from '../html.js'
import { csrfField, layout, type Notice, when } from '../layout.js'
import type { PortalSession } from '../portal-sessions.js'

export interface RosterRow {
  principalId?: string
  keyId?: string
  all?: true
  reason: string | null
  revokedAt: number
}

const sponsorField = (id: string) =>
  html`<label for="${id}">Sponsor token (asked for each time, never kept)</label>
<input id="${id}" name="sponsorToken" type="password" required autocomplete="off" spellcheck="false">`

function targetOf(r: RosterRow): { kind: string; id: string; label: string } {
  if (r.all) return { kind: 'all', id: '', label: 'the whole tenant' }
  if (r.keyId) return { kind: 'key', id: r.keyId, label: `key ${r.keyId}` }
  return { kind: 'principal', id: r.principalId ?? '', label: `principal ${r.principalId ?? ''}` }
}

export function killSwitchPage(session: PortalSession, roster: RosterRow[], notice?: Notice): Html {
  const rows = roster.map((r, i) => {
    const t = targetOf(r)
    return html`<tr><td>${t.label}</td><td>${r.reason ?? '—'}</td><td>${when(r.revokedAt)}</td><td>
<form method="post" action="/portal/kill-switch/reinstate" class="inline">${csrfField(session)}
<input type="hidden" name="targetKind" value="${t.kind}"><input type="hidden" name="targetId" value="${t.id}">
${sponsorField(`reinstate-token-${i}`)}
<button type="submit">Reinstate</button></form></td></tr>`
  })
  return layout({
    title: 'Kill switch',
    path: '/portal/kill-switch',
    session,
    notice,
    body: html`<section aria-labelledby="h-revoke"><h2 id="h-revoke">Revoke</h2>
<p>A revocation stops the next write of what it names, on every proxy, at once. It is undone by reinstating.</p>
<form method="post" action="/portal/kill-switch/revoke" class="card">${csrfField(session)}
<fieldset><legend>What to stop</legend>
<input type="radio" id="tk-key" name="targetKind" value="key" checked><label for="tk-key">One API key</label>
<input type="radio" id="tk-principal" name="targetKind" value="principal"><label for="tk-principal">A principal (all its keys)</label>
<input type="radio" id="tk-all" name="targetKind" value="all"><label for="tk-all">The whole tenant</label>
</fieldset>
<label for="targetId">Key or principal id (empty for the whole tenant)</label>
<input id="targetId" name="targetId" type="text" spellcheck="false">
<label for="revoke-reason">Reason (optional, on the receipt)</label>
<input id="revoke-reason" name="reason" type="text" maxlength="500">
${sponsorField('revoke-token')}
<button type="submit" class="danger">Revoke now</button>
</form></section>
<section aria-labelledby="h-grant"><h2 id="h-grant">Grant one write</h2>
<p>A grant lets one write of a <code>require_grant</code> verb through (as <code>POST /v1/grants</code>); it is used up by that write.</p>
<form method="post" action="/portal/kill-switch/grant" class="card">${csrfField(session)}
<label for="grant-verb">Verb</label><input id="grant-verb" name="verb" type="text" required spellcheck="false">
<label for="grant-target">Target (optional: any target when empty)</label><input id="grant-target" name="target" type="text" spellcheck="false">
<label for="grant-principal">Principal id (optional: any principal when empty)</label><input id="grant-principal" name="principalId" type="text" spellcheck="false">
<label for="grant-environment">Environment (optional)</label><input id="grant-environment" name="environment" type="text" spellcheck="false">
<label for="grant-ttl">Valid for, in seconds (optional, default 900)</label><input id="grant-ttl" name="ttlSeconds" type="text" inputmode="numeric">
<label for="grant-reason">Reason (optional, on the receipt)</label><input id="grant-reason" name="reason" type="text" maxlength="500">
${sponsorField('grant-token')}
<button type="submit">Grant</button>
</form></section>
<section aria-labelledby="h-roster"><h2 id="h-roster">Roster</h2>
${
  roster.length === 0
    ? html`<p data-testid="roster-empty">Nothing is revoked.</p>`
    : html`<table class="receipts" data-testid="roster"><caption>Revoked now</caption><thead><tr><th scope="col">target</th><th scope="col">reason</th><th scope="col">since</th><th scope="col">reinstate</th></tr></thead><tbody>${rows}</tbody></table>`
}</section>`,
  })
}
