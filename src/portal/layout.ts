import { Html, html } from './html.js'
import type { PortalSession } from './portal-sessions.js'

export const NAV = [
  { href: '/portal', label: 'Overview' },
  { href: '/portal/live', label: 'Live decisions' },
  { href: '/portal/approvals', label: 'Approvals' },
  { href: '/portal/kill-switch', label: 'Kill switch' },
  { href: '/portal/policies', label: 'Policies' },
  { href: '/portal/principals', label: 'Principals and keys' },
  { href: '/portal/audit', label: 'Audit' },
] as const

export interface Notice {
  kind: 'ok' | 'error'
  text: string
}

/** The hidden field every state-changing form carries. */
export function csrfField(session: Pick<PortalSession, 'csrfToken'>): Html {
  return html`<input type="hidden" name="_csrf" value="${session.csrfToken}">`
}

export function notice(n: Notice | undefined): Html {
  if (!n) return new Html('')
  return n.kind === 'error'
    ? html`<div class="notice error" role="alert">${n.text}</div>`
    : html`<div class="notice ok" role="status">${n.text}</div>`
}

/** The page shell: no inline script or style (the CSP forbids both); assets are same-origin files. */
export function layout(opts: {
  title: string
  path: string
  session: PortalSession | null
  notice?: Notice | undefined
  body: Html
}): Html {
  const { session } = opts
  const nav = session
    ? html`<nav aria-label="Portal"><ul>${NAV.map(
        (n) =>
          html`<li><a href="${n.href}"${opts.path === n.href ? new Html(' aria-current="page"') : ''}>${n.label}</a></li>`,
      )}</ul>
      <form method="post" action="/portal/sign-out" class="sign-out">${csrfField(session)}
        <span class="who">${session.caller.principalName}</span>
        <button type="submit">Sign out</button></form></nav>`
    : ''
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${opts.title} · writegate</title>
<link rel="stylesheet" href="/portal/assets/portal.css">
<script src="/portal/assets/portal.js" defer></script>
</head>
<body>
<header><a class="brand" href="/portal">writegate</a>${nav}</header>
<main id="main">
<h1>${opts.title}</h1>
${notice(opts.notice)}
${opts.body}
</main>
</body>
</html>`
}

export function when(ts: number | null | undefined): string {
  if (ts === null || ts === undefined) return '—'
  return new Date(ts * 1000).toISOString().replace('.000Z', 'Z')
}
