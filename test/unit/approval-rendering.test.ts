import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import type { PublicAction } from '../../src/actions/approval-service.js'
import { MAX_JSON_DEPTH } from '../../src/core/json-depth.js'
import type { Receipt } from '../../src/core/receipt.js'
import { jsonTree } from '../../src/portal/json-tree.js'
import { approvalPage } from '../../src/portal/pages/approvals.js'
import { auditPage } from '../../src/portal/pages/audit.js'
import type { PortalSession } from '../../src/portal/portal-sessions.js'
import { HIDDEN_CLASS, visible } from '../../src/portal/visible-text.js'

/** The text a reader sees of a fragment: tags dropped, entities read back. */
const seen = (fragment: string) =>
  fragment
    .replace(/<[^>]+>/g, '')
    .replace(/&quot;/g, '"')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&')

const session: PortalSession = {
  caller: {
    kind: 'key',
    tenantId: 'ten_1',
    keyId: 'key_1',
    principalId: 'prn_1',
    principalName: 'admin',
    scope: 'admin',
    dead: null,
  },
  csrfToken: 'csrf',
  createdAt: 1,
  expiresAt: 2,
}

function action(params: Record<string, unknown>, target: string | null = null): PublicAction {
  return {
    actionId: 'act_1',
    systemId: 'sys_billing',
    tool: 'annotate',
    verb: 'refund',
    target,
    environment: null,
    params,
    principalId: 'prn_agent',
    keyId: 'key_agent',
    stagedReceiptId: 'rcp_1',
    revertOf: null,
    createdAt: 1,
    expiresAt: 2,
    request: null,
  }
}

t.test('hidden characters are shown as code points, not obeyed', async (t) => {
  const spoof = 'acct_\u202E9999_eciffo\u202C'
  t.equal(seen(visible(spoof).value), 'acct_U+202E9999_eciffoU+202C')
  t.equal(seen(visible('alice\u200B').value), 'aliceU+200B', 'a zero-width space')
  t.equal(seen(visible('a\u2028b').value), 'aU+2028b', 'a line separator')
  t.equal(seen(visible('x\u3164y\u034Fz').value), 'xU+3164yU+034Fz', 'a Hangul filler and a grapheme joiner')
  t.equal(
    seen(visible('line 1\nline 2\tx', { lines: true }).value),
    'line 1\nline 2\tx',
    'a text body keeps its lines',
  )
  t.equal(seen(visible('a\nb').value), 'aU+000Ab', 'elsewhere a line feed is shown too')
  t.equal(visible('<b>').value, '&lt;b&gt;', 'and everything is escaped')
})

t.test('every character a browser draws as nothing is marked (found in review)', async (t) => {
  // Default-ignorable: drawn as nothing, so `dry\u2065_run` read as "dry_run" while the replay
  // sent another key. Unassigned code points too, and a byte-order mark.
  for (const c of ['\u2065', '\u17B4', '\u180B', '\u{E0080}', '\uFFF0', '\u{E01F0}', '\uFEFF']) {
    const code = `U+${(c.codePointAt(0) as number).toString(16).toUpperCase().padStart(4, '0')}`
    t.equal(seen(visible(`dry${c}_run`).value), `dry${code}_run`, code)
  }
  t.equal(seen(visible('dry_run café ✓').value), 'dry_run café ✓', 'visible text stays as it is')
})

t.test("the Live page's script marks the same characters as the pages", async (t) => {
  const script = readFileSync(
    join(import.meta.dirname, '..', '..', 'src', 'portal', 'assets', 'portal.js'),
    'utf8',
  )
  const m = /const HIDDEN_CLASS =\s*'([^']*)'/.exec(script)
  t.equal(m?.[1]?.replace(/\\\\/g, '\\'), HIDDEN_CLASS)
})

t.test('the audit table marks hidden characters in what agents named (found in review)', async (t) => {
  const receipt = {
    receiptId: 'rcp_1',
    seq: 1,
    createdAt: 1,
    kind: 'CHECK',
    decision: 'DENY',
    verb: 'provision',
    target: 'vm-\u202E1000-prod',
    principalId: 'prn_1',
    principalName: 'agent\u2065',
    reason: 'policy_deny',
    detail: {},
  } as unknown as Receipt
  const page = auditPage(session, { query: {} as never, results: [receipt], scanned: 1, headSeq: 1 }).value
  t.match(seen(page), /vm-U\+202E1000-prod/)
  t.match(seen(page), /agentU\+2065/)
  t.notMatch(page, /\u202E/, 'the control itself is not in the page')
})

t.test('what an approver sees of the parameters is all of them, as sent', async (t) => {
  // A payload nested deeper than the page once drew (32 levels), within what is accepted.
  let deep: unknown = { payload: 'HIDDEN_PAYLOAD_delete_all' }
  for (let i = 0; i < MAX_JSON_DEPTH - 2; i++) deep = { n: deep }
  const page = approvalPage(session, action({ deep }, 'acct_\u202E9999_eciffo\u202C')).value
  t.match(seen(page), /HIDDEN_PAYLOAD_delete_all/, 'the deepest value is on the page')
  t.match(seen(page), /acct_U\+202E9999_eciffoU\+202C/, 'the target shows its bidi controls')
  t.notMatch(page, /\u202E/, 'and none is left to act on the page')

  // A key with a line break cannot draw a parameter of its own.
  const keys = seen(jsonTree({ 'amount\n• amount': 100000 }).value)
  t.ok(keys.includes('"amount\\n• amount"'), 'the key is quoted, its line break shown as \\n')

  // Past the depth limit, the rest is shown as JSON text, not cut.
  let deeper: unknown = 'END'
  for (let i = 0; i < MAX_JSON_DEPTH + 5; i++) deeper = [deeper]
  t.match(seen(jsonTree(deeper).value), /\[\[\[\["END"\]\]\]\]/)
})
