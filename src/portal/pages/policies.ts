import type { PolicyObject } from '../../policy/policy-view.js'
import { type Html, html } from '../html.js'
import { csrfField, layout, type Notice, when } from '../layout.js'
import type { PortalSession } from '../portal-sessions.js'

function effectiveTable(p: PolicyObject): Html {
  const eff = p.effectivePolicy
  if (!eff) return html``
  return html`<details><summary>Effective policy (${Object.keys(eff).length} verbs)</summary>
<table class="policy"><thead><tr><th scope="col">verb</th><th scope="col">mode</th><th scope="col">from</th></tr></thead><tbody>${Object.entries(
    eff,
  ).map(
    ([verb, mode]) =>
      html`<tr><td><code>${verb}</code></td><td class="mode-${mode}">${mode}</td><td>${p.policyProvenance?.[verb] ?? '—'}</td></tr>`,
  )}</tbody></table></details>`
}

/** One editable layer. `draft` keeps what the human typed when the API refused it. */
function layerForm(session: PortalSession, p: PolicyObject, draft: string | undefined, index: number): Html {
  const name =
    p.scope === 'tenant'
      ? 'Tenant'
      : p.scope === 'environment'
        ? `Environment: ${p.environment ?? ''}`
        : `Principal: ${p.principalName ?? p.principalId ?? ''}`
  const key =
    p.scope === 'environment' ? (p.environment ?? '') : p.scope === 'principal' ? (p.principalId ?? '') : ''
  return html`<section class="card" aria-labelledby="h-layer-${index}"><h2 id="h-layer-${index}">${name}</h2>
<p class="hint">Version ${p.version}, updated ${when(p.updatedAt)}</p>
<form method="post" action="/portal/policies">${csrfField(session)}
<input type="hidden" name="scope" value="${p.scope}"><input type="hidden" name="key" value="${key}">
<label for="policy-${index}">Verb → mode (JSON)</label>
<textarea id="policy-${index}" name="policy" rows="6" spellcheck="false">${draft ?? JSON.stringify(p.policy, null, 2)}</textarea>
<button type="submit">Save ${name}</button></form>
${effectiveTable(p)}</section>`
}

export function policiesPage(
  session: PortalSession,
  layers: PolicyObject[],
  opts: { notice?: Notice; draft?: { scope: string; key: string; text: string } } = {},
): Html {
  return layout({
    title: 'Policies',
    path: '/portal/policies',
    session,
    notice: opts.notice,
    body: html`<p>Three layers fold into the effective policy: tenant, then environment, then principal. Modes: <code>allow</code>, <code>step_up</code>, <code>deny</code>.</p>
${layers.map((p, i) => {
  const key =
    p.scope === 'environment' ? (p.environment ?? '') : p.scope === 'principal' ? (p.principalId ?? '') : ''
  const draft =
    opts.draft && opts.draft.scope === p.scope && opts.draft.key === key ? opts.draft.text : undefined
  return layerForm(session, p, draft, i)
})}`,
  })
}
