import type { ApiKey } from '../../core/identity.js'
import type { PrincipalView } from '../../identity/principal-service.js'
import { type Html, html } from '../html.js'
import { csrfField, layout, type Notice, when } from '../layout.js'
import type { PortalSession } from '../portal-sessions.js'

export function principalsPage(
  session: PortalSession,
  principals: { principal: PrincipalView; keys: ApiKey[] }[],
  notice?: Notice,
): Html {
  const rows = principals.map(({ principal: p, keys }) => {
    const toggle = p.disabled
      ? html`<input type="hidden" name="disabled" value="false"><button type="submit">Enable</button>`
      : html`<input type="hidden" name="disabled" value="true"><button type="submit" class="danger">Disable</button>`
    return html`<tr data-principal="${p.principalId}"><td>${p.name}</td><td><code>${p.principalId}</code></td>
<td>${p.disabled ? 'disabled' : 'active'}</td>
<td>${keys.length === 0 ? '—' : html`<ul class="plain">${keys.map((k) => html`<li><code>${k.id}</code> ${k.scope}, since ${when(k.createdAt)}</li>`)}</ul>`}</td>
<td><form method="post" action="/portal/principals/${p.principalId}/state" class="inline">${csrfField(session)}${toggle}</form>
${
  keys.length > 0
    ? html`<form method="post" action="/portal/principals/${p.principalId}/revoke-keys" class="inline">${csrfField(session)}
<label for="why-${p.principalId}">Reason</label><input id="why-${p.principalId}" name="reason" type="text" maxlength="500">
<button type="submit" class="danger">Revoke all keys</button></form>`
    : ''
}</td></tr>`
  })
  return layout({
    title: 'Principals and keys',
    path: '/portal/principals',
    session,
    notice,
    body: html`<p>A disabled principal's keys are refused until it is enabled again; a revoked key is dead for good.</p>
<table class="receipts"><caption>Principals</caption><thead><tr><th scope="col">name</th><th scope="col">id</th><th scope="col">state</th><th scope="col">live keys</th><th scope="col">actions</th></tr></thead>
<tbody>${rows}</tbody></table>`,
  })
}
