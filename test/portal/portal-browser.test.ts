import { mkdirSync, readFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { generate } from 'otplib'
import t, { type Test } from 'tap'
import type { ManualClock } from '../../src/core/clock.js'
import { startBillingProxy } from '../helpers/billing-proxy.js'
import { seriousViolations, startBrowser } from '../helpers/browser.js'
import { agentRequest } from '../helpers/proxy.js'
import { waitFor } from '../helpers/wait.js'

/**
 * The portal in headless Chromium against a real control plane, gate-proxy and upstream:
 * sign-in, every page (each checked by axe-core), an approval whose TOTP code lets a staged
 * proxy write reach the upstream, the kill switch stopping the next write, stored XSS and
 * cross-site forms. WRITEGATE_PORTAL_SCREENSHOTS=<dir> also saves a screenshot of each page.
 */

const SHOTS = process.env.WRITEGATE_PORTAL_SCREENSHOTS
const XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
/** For a path segment: no slash (an encoded one is refused before any decision). */
const XSS_SEGMENT = '<img src=x onerror="window.__xss=3">'

t.test('the portal in a real browser', async (t) => {
  const bench = await startBillingProxy(t)
  const { cp, tenant } = bench
  await cp.app.listen({ port: 0, host: '127.0.0.1' })
  const origin = `http://127.0.0.1:${(cp.app.server.address() as AddressInfo).port}`
  const clock = cp.clock as ManualClock
  const code = async () => {
    clock.set(clock.nowMs() + 30_000)
    return generate({ secret: tenant.totp.secret, epoch: Math.floor(clock.nowMs() / 1000) })
  }
  const browser = await startBrowser(t)
  const context = await browser.newContext({ acceptDownloads: true })
  t.teardown(() => context.close())
  const page = await context.newPage()
  page.setDefaultTimeout(30_000)
  const dialogs: string[] = []
  page.on('dialog', (d) => {
    dialogs.push(d.message())
    void d.dismiss()
  })
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(e.message))

  /** No script ran, no planted element exists, and axe finds nothing serious. */
  async function checkPage(t: Test, name: string) {
    t.equal(await page.evaluate('window.__xss'), undefined, `${name}: no planted script ran`)
    t.equal(
      await page.locator('img[src="x"], main script, [onerror]').count(),
      0,
      `${name}: nothing planted became markup`,
    )
    const violations = await seriousViolations(page)
    t.same(
      violations.map((v) => `${v.id}: ${v.help}`),
      [],
      `${name}: no serious or critical accessibility violation`,
    )
    if (SHOTS) {
      mkdirSync(SHOTS, { recursive: true })
      await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true })
    }
  }

  const agentWrite = (path: string, body: string, method = 'POST') =>
    agentRequest(bench.port, { method, path, headers: { 'content-type': 'application/json' }, body })

  // Agent-supplied content that pages will show: a staged body, a target, reasons.
  const staged = await agentWrite(
    '/sys_billing/v1/refunds',
    JSON.stringify({ charge: 'ch_42', amount: 1200, note: XSS, [XSS]: 'key' }),
  )
  t.equal(staged.status, 428, staged.body.toString())
  const actionId = staged.json().actionId as string
  const second = await agentWrite('/sys_billing/v1/refunds', JSON.stringify({ charge: 'ch_43', amount: 5 }))
  const dismissId = second.json().actionId as string
  await agentWrite(`/sys_billing/v1/customers/${encodeURIComponent(XSS_SEGMENT)}`, '', 'DELETE')
  // provision needs a grant: DENY, with the planted id as its target.
  const denied = await agentWrite(`/sys_billing/v1/provision/${encodeURIComponent(XSS_SEGMENT)}`, '{}')
  t.equal(denied.status, 403, denied.body.toString())
  await agentWrite('/sys_billing/v1/verify', '{}')

  t.test('sign-in: a wrong code is refused on the page; the right one opens the overview', async (t) => {
    await page.goto(`${origin}/portal`)
    t.equal(new URL(page.url()).pathname, '/portal/sign-in')
    await checkPage(t, 'sign-in')
    await page.fill('#apiKey', tenant.apiKey)
    await page.fill('#code', '000000')
    await page.click('button[type=submit]')
    t.match(await page.locator('[role=alert]').textContent(), /TOTP code invalid.*totp_invalid/)
    t.equal(await page.inputValue('#apiKey'), '', 'the key is not echoed back into the page')
    await page.fill('#apiKey', tenant.apiKey)
    await page.fill('#code', await code())
    await page.click('button[type=submit]')
    await page.waitForURL(`${origin}/portal`)
    t.equal(await page.locator('h1').textContent(), 'Overview')
    const cookies = await context.cookies()
    const session = cookies.find((c) => c.name === 'wg_portal')
    t.match(session, { httpOnly: true, sameSite: 'Strict' })
    t.equal(await page.evaluate('document.cookie'), '', 'no cookie is readable by script')
    t.equal(await page.evaluate('localStorage.length + sessionStorage.length'), 0, 'nothing in web storage')
    t.notMatch(page.url(), /svc_|wgps_/, 'no secret in the URL')
  })

  t.test('overview: charts, checkpoint and the log verifying', async (t) => {
    await page.goto(`${origin}/portal`)
    t.equal(await page.locator('figure.chart svg').count(), 2)
    t.match(await page.locator('[data-testid=log-valid]').textContent(), /^yes/)
    await checkPage(t, 'overview')
  })

  t.test('live decisions: a new write appears; the filter hides others', async (t) => {
    await page.goto(`${origin}/portal/live`)
    // Waits are locators: the page's CSP forbids the eval a string predicate needs.
    await page.locator('#live-status', { hasText: /^Live/ }).waitFor()
    // Found by its own seq: other receipts (this page's sign-in, an earlier write whose receipt
    // reaches the log late) may arrive at any moment too.
    const write = await agentWrite('/sys_billing/v1/verify', '{"live":true}')
    const receiptId = write.headers['x-writegate-receipt'] as string
    t.match(receiptId, /^rcp_/)
    let seq: unknown
    await waitFor(
      async () => {
        const r = await bench.api.get(`/v1/receipts/${receiptId}`, { bearer: tenant.apiKey })
        seq = r.status === 200 ? r.body.seq : undefined
        return seq !== undefined
      },
      15_000,
      'the receipt in the log',
    )
    const row = page.locator(`#live-table tbody tr[data-seq="${String(seq)}"]`)
    await row.waitFor({ state: 'attached' })
    t.equal(await row.count(), 1, 'the new write is listed, live, once')
    t.match(await row.textContent(), /CHECK.*ALLOW.*verify/)
    await page.selectOption('#f-decision', 'DENY')
    const visible = await page.locator('#live-table tbody tr:not([hidden])').allTextContents()
    t.ok(
      visible.some((row) => row.includes(XSS_SEGMENT)),
      'the DENY of the planted target is there, as text',
    )
    t.ok(
      visible.every((row) => row.includes('DENY') || row.includes('STEP_UP') === false),
      'only DENY rows are shown',
    )
    t.notOk(visible.some((row) => /ALLOW/.test(row)))
    await page.selectOption('#f-decision', '')
    await checkPage(t, 'live')
  })

  t.test('approvals: the request readable, a params-free replay, approved with a TOTP code', async (t) => {
    await page.goto(`${origin}/portal/approvals`)
    t.ok(await page.locator(`a[href="/portal/approvals/${actionId}"]`).count())
    await checkPage(t, 'approvals')
    await page.click(`a[href="/portal/approvals/${actionId}"]`)
    t.equal(await page.locator('[data-testid=method]').textContent(), 'POST')
    t.equal(await page.locator('[data-testid=path]').textContent(), '/v1/refunds')
    const tree = (await page.locator('[data-testid=body]').textContent()) ?? ''
    t.match(tree, /charge.*"ch_42"/)
    t.ok(tree.includes(JSON.stringify(XSS)), 'the planted markup is shown as text (a JSON string)')
    await checkPage(t, 'approval')
    const before = bench.upstream.received.length
    await page.fill('#totpCode', '111111')
    await page.click('text=Approve and write')
    t.match(await page.locator('[role=alert]').textContent(), /totp_invalid/)
    t.equal(bench.upstream.received.length, before, 'a wrong code writes nothing')
    await page.fill('#totpCode', await code())
    await page.click('text=Approve and write')
    t.equal(await page.locator('[data-testid=outcome]').textContent(), 'executed')
    const receiptId = await page.locator('[data-testid=receipt]').textContent()
    t.match(receiptId, /^rcp_/)
    const got = bench.upstream.received.at(-1)
    t.equal(bench.upstream.received.length, before + 1, 'the approved write reached the upstream once')
    t.equal(got?.url, '/v1/refunds')
    t.equal(got?.headers.authorization, 'Bearer up-secret', 'with the injected credential')
    t.same(JSON.parse(got?.body.toString() ?? '{}').charge, 'ch_42', 'the exact staged body')
    await checkPage(t, 'approval-result')
  })

  t.test('approvals: deny with a reason; the write never happens', async (t) => {
    const before = bench.upstream.received.length
    await page.goto(`${origin}/portal/approvals/${dismissId}`)
    await page.fill('#reason', XSS)
    await page.click('text=Deny: never write it')
    t.match(await page.locator('[role=status]').first().textContent(), new RegExp(`Denied ${dismissId}`))
    t.equal(await page.locator(`a[href="/portal/approvals/${dismissId}"]`).count(), 0)
    t.equal(bench.upstream.received.length, before)
    await checkPage(t, 'approvals-after-deny')
  })

  t.test('kill switch: revoking the tenant stops the next write; reinstate restores it', async (t) => {
    await page.goto(`${origin}/portal/kill-switch`)
    await checkPage(t, 'kill-switch')
    await page.check('#tk-all')
    await page.fill('#revoke-reason', XSS)
    await page.fill('#revoke-token', 'svc_sp_not-the-token')
    await page.click('text=Revoke now')
    t.match(await page.locator('[role=alert]').textContent(), /sponsor_token_invalid/)
    const ok = await agentWrite('/sys_billing/v1/verify', '{}')
    t.equal(ok.status, 200, 'still writing: nothing was revoked')
    await page.check('#tk-all')
    await page.fill('#revoke-reason', XSS)
    await page.fill('#revoke-token', tenant.sponsorToken)
    await page.click('text=Revoke now')
    t.match(await page.locator('[role=status]').first().textContent(), /Revoked the whole tenant/)
    const before = bench.upstream.received.length
    const stopped = await agentWrite('/sys_billing/v1/verify', '{}')
    t.equal(stopped.status, 403)
    t.equal(stopped.json().reason, 'sponsor_revoked_tenant')
    t.equal(bench.upstream.received.length, before, 'the next write never reached the upstream')
    t.ok((await page.locator('[data-testid=roster]').textContent())?.includes(XSS), 'the reason, as text')
    t.equal(await page.inputValue('#revoke-token'), '', 'the sponsor token is not kept in the page')
    await checkPage(t, 'kill-switch-revoked')
    await page.fill('#reinstate-token-0', tenant.sponsorToken)
    await page.click('button:has-text("Reinstate")')
    // The form's answer is a new page: count once it is there (count() does not wait).
    await page.locator('[data-testid=roster-empty]').waitFor()
    t.equal(await page.locator('[data-testid=roster-empty]').count(), 1)
    t.equal((await agentWrite('/sys_billing/v1/verify', '{}')).status, 200, 'writing again')
  })

  t.test('grant: one require_grant write is let through once, then refused again', async (t) => {
    const before = bench.upstream.received.length
    t.equal((await agentWrite('/sys_billing/v1/provision/vm-7', '{}')).status, 403, 'no grant yet')
    await page.goto(`${origin}/portal/kill-switch`)
    await page.fill('#grant-verb', 'no-such-verb')
    await page.fill('#grant-token', tenant.sponsorToken)
    await page.click('button:has-text("Grant")')
    t.match(await page.locator('[role=alert]').textContent(), /unknown_verb/)
    t.equal(await page.inputValue('#grant-token'), '', 'the sponsor token is not kept in the page')
    await page.fill('#grant-verb', 'provision')
    await page.fill('#grant-target', 'vm-7')
    await page.fill('#grant-ttl', 'soon')
    await page.fill('#grant-token', tenant.sponsorToken)
    await page.click('button:has-text("Grant")')
    t.match(await page.locator('[role=alert]').textContent(), /invalid_request/, 'a bad validity is refused')
    await page.fill('#grant-verb', 'provision')
    await page.fill('#grant-target', 'vm-7')
    await page.fill('#grant-reason', XSS)
    await page.fill('#grant-token', tenant.sponsorToken)
    await page.click('button:has-text("Grant")')
    t.match(
      await page.locator('[role=status]').first().textContent(),
      /Granted grt_\w+: one provision write on vm-7/,
    )
    await checkPage(t, 'kill-switch-granted')
    t.equal((await agentWrite('/sys_billing/v1/provision/vm-7', '{}')).status, 200, 'the granted write')
    t.equal((await agentWrite('/sys_billing/v1/provision/vm-7', '{}')).status, 403, 'used up')
    t.equal(bench.upstream.received.length, before + 1, 'exactly one write reached the upstream')
  })

  t.test('approvals: a tool call with edited parameters shows the diff and writes the edit', async (t) => {
    const enrolled = await bench.api.post(
      '/v1/systems',
      {
        systemId: 'sys_tools',
        kind: 'http',
        upstream: bench.upstream.origin,
        credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'BILLING_TOKEN' },
        reads: 'pass',
        routes: [],
        tools: [
          {
            name: 'issue_refund',
            verb: 'refund',
            method: 'POST',
            pathTemplate: '/v1/refunds',
            target: '{charge}',
            params: {
              type: 'object',
              required: ['charge', 'amount'],
              additionalProperties: false,
              properties: { charge: { type: 'string' }, amount: { type: 'integer', minimum: 1 } },
            },
          },
        ],
      },
      { bearer: tenant.apiKey },
    )
    t.equal(enrolled.status, 201, JSON.stringify(enrolled.body))
    const check = await bench.api.post(
      '/v1/check',
      {
        verb: 'refund',
        target: 'ch_77',
        tool: { name: 'issue_refund', params: { charge: 'ch_77', amount: 100 } },
      },
      { bearer: bench.agent.apiKey },
    )
    const id = check.body.actionId as string
    t.match(id, /^act_/, JSON.stringify(check.body))
    await page.goto(`${origin}/portal/approvals/${id}`)
    await page.fill('#params', '{"amount": "lots"}')
    await page.fill('#totpCode', await code())
    const before = bench.upstream.received.length
    await page.click('text=Approve and write')
    t.match(await page.locator('[role=alert]').textContent(), /amount/, 'edits are checked against the tool')
    t.equal(bench.upstream.received.length, before)
    await page.fill('#params', '{"amount": 250}')
    await page.click('text=Show the changes')
    const diff = page.locator('[data-testid=diff] tbody tr')
    await diff.first().waitFor()
    t.equal(await diff.count(), 1)
    t.match(await diff.first().textContent(), /"amount"\s*changed\s*100\s*250/)
    t.equal(await page.inputValue('#params'), '{"amount": 250}', 'the edit is kept for approval')
    await checkPage(t, 'approval-diff')
    await page.fill('#totpCode', await code())
    await page.click('text=Approve and write')
    t.equal(await page.locator('[data-testid=outcome]').textContent(), 'executed')
    t.equal(bench.upstream.received.length, before + 1)
    const got = bench.upstream.received.at(-1)
    t.equal(got?.url, '/v1/refunds')
    t.same(JSON.parse(got?.body.toString() ?? '{}'), { charge: 'ch_77', amount: 250 }, 'the edited call')
  })

  t.test(
    'policies: a refused edit shows the API message and keeps the draft; a good one saves',
    async (t) => {
      await page.goto(`${origin}/portal/policies`)
      await checkPage(t, 'policies')
      await page.fill('#policy-0', `{"no.such.verb": "allow", "x": "${XSS.replace(/"/g, '\\"')}"}`)
      await page.click('text=Save Tenant')
      t.match(await page.locator('[role=alert]').textContent(), /invalid_request|unknown/)
      t.match(await page.inputValue('#policy-0'), /no\.such\.verb/, 'the draft is kept')
      await checkPage(t, 'policies-refused')
      await page.fill('#policy-0', '{"verify": "step_up"}')
      await page.click('text=Save Tenant')
      t.match(await page.locator('[role=status]').first().textContent(), /Policy saved/)
      const write = await agentWrite('/sys_billing/v1/verify', '{}')
      t.equal(write.status, 428, 'the new policy is in force at the proxy')
      await page.fill('#policy-0', '{"verify": "allow"}')
      await page.click('text=Save Tenant')
    },
  )

  t.test('principals and keys: disable, enable and revoke take effect for the key', async (t) => {
    const bot = await bench.api.post('/v1/principals', { name: 'ops-bot' }, { bearer: tenant.apiKey })
    const key = await bench.api.post(
      '/v1/keys',
      { email: tenant.email, principal_id: bot.body.principalId, scope: 'agent' },
      { bearer: tenant.apiKey },
    )
    const me = async () => (await bench.api.get('/v1/me', { bearer: key.body.apiKey as string })).status
    t.equal(await me(), 200)
    await page.goto(`${origin}/portal/principals`)
    await checkPage(t, 'principals')
    const row = () => page.locator(`tr[data-principal="${bot.body.principalId}"]`)
    t.match(await row().textContent(), new RegExp(String(key.body.keyId)), 'its live key is listed')
    await row().locator('button:has-text("Disable")').click()
    t.match(await page.locator('[role=status]').first().textContent(), /ops-bot is disabled/)
    t.equal(await me(), 401, "a disabled principal's key is refused")
    await row().locator('button:has-text("Enable")').click()
    t.equal(await me(), 200, 'enabled again')
    await row().locator('button:has-text("Revoke all keys")').click()
    t.match(await page.locator('[role=status]').first().textContent(), /Revoked 1 key/)
    t.equal(await me(), 401, 'the revoked key is dead')
  })

  t.test('audit: search, a receipt, verify, and an export with progress', async (t) => {
    await page.goto(`${origin}/portal/audit?decision=DENY&text=${encodeURIComponent(XSS)}`)
    t.equal(await page.inputValue('#q-text'), XSS, 'the query is put back as a value, not markup')
    await checkPage(t, 'audit-search-planted')
    await page.goto(`${origin}/portal/audit?kind=ACTION_DISMISSED`)
    const rows = page.locator('[data-testid=results] tbody tr')
    t.equal(await rows.count(), 1)
    await rows.first().locator('a').click()
    t.ok(
      (await page.locator('[data-testid=receipt-json]').textContent())?.includes(JSON.stringify(XSS)),
      'the dismiss reason, as text',
    )
    await checkPage(t, 'receipt')
    await page.goto(`${origin}/portal/audit?verify=1`)
    t.match(await page.locator('[data-testid=verify-result]').textContent(), /The log verifies/)
    await checkPage(t, 'audit')
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export-link')])
    const file = await download.path()
    const lines = readFileSync(file, 'utf8').trim().split('\n')
    t.ok(lines.length > 10, `${lines.length} lines`)
    t.match(JSON.parse(lines[0] as string), { tenantId: tenant.tenantId })
    await page.locator('#export-status', { hasText: /^Done/ }).waitFor()
    t.equal(
      await page.evaluate("document.getElementById('export-progress').value"),
      await page.evaluate("document.getElementById('export-progress').max"),
      'the progress bar reached the end',
    )
  })

  t.test('a cross-site form cannot change anything', async (t) => {
    // A page on another site (localhost is not 127.0.0.1) posting to the portal: the session
    // cookie is SameSite=Strict, so it never comes along, and the CSRF token is unknown anyway.
    const evil = await context.newPage()
    const portalPort = new URL(origin).port
    // Not a /portal page: its CSP (form-action 'self') would stop the attacker's form in the browser
    // before the portal could refuse it.
    await evil.goto(`http://localhost:${portalPort}/no-such-page`).catch(() => {})
    await evil.setContent(`<form id="f" method="post" action="${origin}/portal/kill-switch/revoke">
      <input name="targetKind" value="all"><input name="sponsorToken" value="${tenant.sponsorToken}"></form>`)
    await Promise.all([evil.waitForNavigation(), evil.evaluate("document.getElementById('f').submit()")])
    t.match(await evil.content(), /portal_session_required|csrf_invalid/)
    const roster = await bench.api.get('/v1/revoked', { bearer: tenant.sponsorToken })
    t.same(roster.body.revoked, [], 'nothing was revoked')
    await evil.close()
  })

  t.test('sign-out ends the session', async (t) => {
    await page.goto(`${origin}/portal`)
    await page.click('text=Sign out')
    await page.waitForURL(`${origin}/portal/sign-in`)
    await page.goto(`${origin}/portal/approvals`)
    t.equal(new URL(page.url()).pathname, '/portal/sign-in')
  })

  t.test('on every page: no dialog opened, no script error', async (t) => {
    t.same(dialogs, [], 'no dialog was ever opened')
    t.same(errors, [], 'no script error on any page')
  })
})
