import { type Html, html } from '../html.js'
import { layout, type Notice } from '../layout.js'

/** Sign-in: an admin API key and the tenant's TOTP or backup code. Nothing is put in the URL. */
export function signInPage(opts: { preCsrf: string; notice?: Notice | undefined }): Html {
  return layout({
    title: 'Sign in',
    path: '/portal/sign-in',
    session: null,
    notice: opts.notice,
    body: html`<form method="post" action="/portal/sign-in" class="card narrow" autocomplete="off">
<input type="hidden" name="_csrf" value="${opts.preCsrf}">
<p>Sign in with an <strong>admin</strong> API key and your tenant's authenticator code (or a backup code).</p>
<label for="apiKey">API key</label>
<input id="apiKey" name="apiKey" type="password" required autocomplete="off" spellcheck="false">
<label for="code">Authenticator or backup code</label>
<input id="code" name="code" type="text" required inputmode="numeric" autocomplete="one-time-code" spellcheck="false">
<button type="submit">Sign in</button>
</form>`,
  })
}
