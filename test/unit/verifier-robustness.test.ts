import t from 'tap'
import { MAX_LINE_BYTES, verifyExport } from '../../src/cli/verify-export.js'
import { ChainVerifier } from '../../src/core/chain-verifier.js'
import { isCanonicalText } from '../../src/core/jcs.js'
import { chainReceipts, draft, EMPTY_HEAD } from '../../src/core/receipt.js'
import { ed25519, exportLines } from '../helpers/audit-logs.js'

const TENANT = 'ten_robust'
const key = ed25519()
const drafts = [1, 2, 3].map((i) =>
  draft({
    receiptId: `rcp_r${i}`,
    tenantId: TENANT,
    kind: 'CHECK',
    decision: 'ALLOW',
    createdAt: 1_800_000_000 + i,
    detail: { n: 10 },
  }),
)

async function verifyLines(lines: string[]) {
  async function* one() {
    yield Buffer.from(`${lines.join('\n')}\n`)
  }
  return verifyExport(one(), key.publicKey)
}

t.test('a number JSON can hold but JCS cannot (1e999) is reported as tampering, never thrown', async (t) => {
  t.equal(isCanonicalText(JSON.parse('{"n":1e999}'), '{"n":1e999}'), false)
  const { lines } = exportLines(TENANT, drafts, key.privateKey)
  t.equal((await verifyLines(lines)).valid, true, 'the untouched export verifies')
  const tampered = [...lines]
  tampered[3] = (tampered[3] as string).replace('"n":10', '"n":1e999')
  const verdict = await verifyLines(tampered)
  t.equal(verdict.valid, false)
  t.match(verdict.failure, { reason: /body_mismatch|malformed|hash_mismatch/ })

  const { receipts } = chainReceipts(EMPTY_HEAD, drafts)
  const v = new ChainVerifier(TENANT, key.publicKey)
  const first = receipts[0]!
  const { hash, ...body } = first
  const storedBody = JSON.stringify(body).replace('"n":10', '"n":1e999')
  const failure = v.pushStored({
    tenantId: TENANT,
    seq: 1,
    receiptId: first.receiptId,
    kind: first.kind,
    decision: first.decision,
    createdAt: first.createdAt,
    body: storedBody,
    hash,
  })
  t.match(failure, { reason: /body_mismatch|hash_mismatch/ }, 'the endpoint side too')
})

t.test(
  'a line longer than any the exporter writes fails at once, never held whole (found in review)',
  async (t) => {
    const { lines } = exportLines(TENANT, drafts, key.privateKey)
    let read = 0
    // A valid start, then one line that never ends: 1 MiB chunks, up to twice the cap.
    async function* endless() {
      yield Buffer.from(`${lines[0]}\n${lines[1]}\n`)
      const chunk = Buffer.alloc(1024 * 1024, 0x20)
      while (read < 2 * MAX_LINE_BYTES) {
        read += chunk.length
        yield chunk
      }
    }
    const verdict = await verifyExport(endless(), key.publicKey)
    t.equal(verdict.valid, false)
    t.match(verdict.failure, {
      reason: 'malformed',
      message: `line 3 is longer than ${MAX_LINE_BYTES} bytes`,
      line: 3,
    })
    t.ok(read <= MAX_LINE_BYTES + 1024 * 1024, `stopped reading at the cap (${read} bytes read)`)
    // A line within the cap that is split over many chunks is still read as one.
    async function* split() {
      const all = Buffer.from(`${lines.join('\n')}\n`)
      for (let i = 0; i < all.length; i += 7) yield all.subarray(i, i + 7)
    }
    t.equal((await verifyExport(split(), key.publicKey)).valid, true)
  },
)
