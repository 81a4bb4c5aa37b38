import { type Html, html } from '../html.js'
import { layout } from '../layout.js'
import type { PortalSession } from '../portal-sessions.js'

export function errorPage(
  session: PortalSession | null,
  status: number,
  code: string,
  message: string,
): Html {
  return layout({
    title: status === 404 ? 'Not found' : 'Refused',
    path: '',
    session,
    notice: { kind: 'error', text: `${message} (${code})` },
    body: html`<p><a href="/portal">Back to the portal</a></p>`,
  })
}
