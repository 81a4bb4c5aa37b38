import fc from 'fast-check'
import t from 'tap'
import { verifyExport } from '../../src/cli/verify-export.js'
import { exportCheckpointLine, exportHeaderLine } from '../../src/core/audit-export.js'
import { ChainVerifier } from '../../src/core/chain-verifier.js'
import { checkpointMessage, checkpointSignatureValid, signCheckpoint } from '../../src/core/checkpoint.js'
import {
  decodeStrictBase64,
  parseEd25519PublicKey,
  publicKeyPem,
  rawPublicKey,
} from '../../src/core/ed25519.js'
import { canonicalJson } from '../../src/core/jcs.js'
import { chainReceipts, EMPTY_HEAD, type Receipt } from '../../src/core/receipt.js'
import { draftArb, ed25519, exportLines } from '../helpers/audit-logs.js'

const TENANT = 'ten_export'
const signer = ed25519()
const intruder = ed25519()

/** Feeds the bytes in chunks of the given sizes, so line splitting across chunks is exercised too. */
async function verifyBytes(buf: Buffer, chunk = 4096) {
  async function* chunks() {
    for (let i = 0; i < buf.length; i += chunk) yield buf.subarray(i, i + chunk)
  }
  return verifyExport(chunks(), signer.publicKey)
}

const text = (lines: string[]) => Buffer.from(`${lines.join('\n')}\n`, 'utf8')

type Mutation =
  | { kind: 'flip'; at: number; xor: number }
  | { kind: 'edit-char'; at: number; char: string }
  | { kind: 'delete'; i: number }
  | { kind: 'swap'; i: number; j: number }
  | { kind: 'insert-copy'; from: number; at: number }
  | { kind: 'insert-forged'; at: number }
  | { kind: 'truncate'; n: number }
  | { kind: 'resign'; keepKeyId: boolean }
  | { kind: 'rewrite'; i: number; resign: boolean }

/** A position in [0, 1), uniform (fc.double leans towards edge values). */
const unit = fc.integer({ min: 0, max: 999_999 }).map((n) => n / 1_000_000)
const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('flip' as const), at: unit, xor: fc.integer({ min: 1, max: 255 }) }),
  fc.record({
    kind: fc.constant('edit-char' as const),
    at: unit,
    char: fc.constantFrom(...'0123456789abcdefXYZ_-. '.split('')),
  }),
  fc.record({ kind: fc.constant('delete' as const), i: unit }),
  fc.record({ kind: fc.constant('swap' as const), i: unit, j: unit }),
  fc.record({ kind: fc.constant('insert-copy' as const), from: unit, at: unit }),
  fc.record({ kind: fc.constant('insert-forged' as const), at: unit }),
  fc.record({ kind: fc.constant('truncate' as const), n: unit }),
  fc.record({ kind: fc.constant('resign' as const), keepKeyId: fc.boolean() }),
  fc.record({ kind: fc.constant('rewrite' as const), i: unit, resign: fc.boolean() }),
)

const pick = (u: number, n: number) => Math.min(n - 1, Math.floor(u * n))

/** Applies a mutation to an export (header, checkpoint, receipts…); the result always differs from the original. */
function mutate(lines: string[], receipts: Receipt[], m: Mutation): Buffer {
  const head = lines.slice(0, 2)
  const body = lines.slice(2)
  const n = body.length
  switch (m.kind) {
    case 'flip': {
      const buf = text(lines)
      const at = pick(m.at, buf.length)
      buf[at] = (buf[at] as number) ^ m.xor
      return buf
    }
    case 'edit-char': {
      // A printable character changed inside a receipt: the text still parses.
      const buf = text(lines)
      const start = Buffer.byteLength(`${head.join('\n')}\n`)
      const at = start + pick(m.at, buf.length - start - 1)
      if (buf[at] === 0x0a) return buf.subarray(0, at) // the line ends here instead
      buf[at] = (m.char as string).charCodeAt(0) === buf[at] ? 0x21 : (m.char as string).charCodeAt(0)
      return buf
    }
    case 'delete':
      body.splice(pick(m.i, n), 1)
      return text([...head, ...body])
    case 'swap': {
      if (n < 2) return text([...head, ...body.slice(0, -1)])
      const i = pick(m.i, n)
      let j = pick(m.j, n)
      if (j === i) j = (i + 1) % n
      ;[body[i], body[j]] = [body[j] as string, body[i] as string]
      return text([...head, ...body])
    }
    case 'insert-copy':
      body.splice(pick(m.at, n + 1), 0, body[pick(m.from, n)] as string)
      return text([...head, ...body])
    case 'insert-forged': {
      // A well-formed receipt that links correctly to its predecessor: only what follows can expose it.
      const at = pick(m.at, n + 1)
      const prev = at === 0 ? EMPTY_HEAD : { seq: at, hash: (receipts[at - 1] as Receipt).hash }
      const { seq: _s, prevHash: _p, hash: _h, ...d } = receipts[pick(m.at, n)] as Receipt
      const [forged] = chainReceipts(prev, [{ ...d, receiptId: 'rcp_forged', reason: 'forged' }]).receipts
      body.splice(at, 0, canonicalJson(forged))
      return text([...head, ...body])
    }
    case 'truncate':
      return text([...head, ...body.slice(0, pick(m.n, n))])
    case 'resign': {
      const cp = JSON.parse(head[1] as string)
      const forged = signCheckpoint(intruder.privateKey, cp)
      if (m.keepKeyId) forged.keyId = cp.keyId
      return text([head[0] as string, exportCheckpointLine(forged), ...body])
    }
    case 'rewrite': {
      // Edit one receipt and re-hash everything after it: the chain is self-consistent, only the checkpoint can tell.
      const i = pick(m.i, n)
      const start = i === 0 ? EMPTY_HEAD : { seq: i, hash: (receipts[i - 1] as Receipt).hash }
      const drafts = receipts.slice(i).map(({ seq: _s, prevHash: _p, hash: _h, ...d }) => d)
      drafts[0] = { ...(drafts[0] as (typeof drafts)[0]), decision: 'ALLOW', reason: 'rewritten history' }
      const rechained = chainReceipts(start, drafts)
      const cp = JSON.parse(head[1] as string)
      const checkpoint = m.resign
        ? exportCheckpointLine(signCheckpoint(intruder.privateKey, { ...cp, hash: rechained.head.hash }))
        : (head[1] as string)
      return text([
        head[0] as string,
        checkpoint,
        ...body.slice(0, i),
        ...rechained.receipts.map((r) => canonicalJson(r)),
      ])
    }
  }
}

t.test('the offline verifier accepts every untouched export, whatever the chunking', async (t) => {
  await fc.assert(
    fc.asyncProperty(
      // No tenant's log is empty: its first key is receipted when the tenant is created.
      fc.array(draftArb(TENANT), { minLength: 1, maxLength: 25 }),
      fc.integer({ min: 1, max: 200 }),
      async (drafts, chunk) => {
        const { lines } = exportLines(TENANT, drafts, signer.privateKey)
        const verdict = await verifyBytes(text(lines), chunk)
        t.equal(verdict.valid, true, verdict.failure?.message ?? 'valid')
        t.equal(verdict.checked, drafts.length)
      },
    ),
    { numRuns: 60 },
  )
})

t.test('the offline verifier detects every mutation', async (t) => {
  const seen = new Map<string, number>()
  await fc.assert(
    fc.asyncProperty(
      fc.array(draftArb(TENANT), { minLength: 1, maxLength: 20 }),
      mutationArb,
      fc.integer({ min: 1, max: 300 }),
      async (drafts, m, chunk) => {
        const { lines, receipts } = exportLines(TENANT, drafts, signer.privateKey)
        const tampered = mutate(lines, receipts, m)
        if (tampered.equals(text(lines))) return // a no-op (e.g. truncating nothing) is not tampering
        const verdict = await verifyBytes(tampered, chunk)
        const reason = verdict.failure?.reason ?? 'none'
        seen.set(`${m.kind}:${reason}`, (seen.get(`${m.kind}:${reason}`) ?? 0) + 1)
        if (verdict.valid) t.fail(`undetected ${JSON.stringify(m)}`)
      },
    ),
    { numRuns: 400 },
  )
  t.comment(`mutation:reason counts ${JSON.stringify([...seen])}`)
  // The reasons name what happened; each family of attack shows up.
  for (const reason of [
    'seq_gap',
    'hash_mismatch',
    'truncated',
    'checkpoint_mismatch',
    'checkpoint_signature_invalid',
  ]) {
    t.ok(
      [...seen.keys()].some((k) => k.endsWith(`:${reason}`)),
      `${reason} was reported`,
    )
  }
})

t.test('specific attacks get specific reasons', async (t) => {
  const drafts = fc.sample(draftArb(TENANT), 6)
  const { lines, receipts } = exportLines(TENANT, drafts, signer.privateKey)
  const reasonOf = async (buf: Buffer) => (await verifyBytes(buf)).failure?.reason
  t.equal(await reasonOf(mutate(lines, receipts, { kind: 'truncate', n: 0.5 })), 'truncated')
  // Found at the end of the file, a cut names no line: the last one holds a sound receipt.
  t.equal((await verifyBytes(mutate(lines, receipts, { kind: 'truncate', n: 0.5 }))).failure?.line, undefined)
  t.equal(await reasonOf(mutate(lines, receipts, { kind: 'delete', i: 0.5 })), 'seq_gap')
  t.equal(
    await reasonOf(mutate(lines, receipts, { kind: 'resign', keepKeyId: true })),
    'checkpoint_signature_invalid',
  )
  t.equal(
    await reasonOf(mutate(lines, receipts, { kind: 'rewrite', i: 0.3, resign: false })),
    'checkpoint_mismatch',
  )
  // A forged receipt appended after the signed head is refused, even with a correct hash.
  const last = receipts.at(-1) as Receipt
  const [extra] = chainReceipts(last, [{ ...drafts[0]!, receiptId: 'rcp_extra' }]).receipts
  t.equal(await reasonOf(text([...lines, canonicalJson(extra)])), 'beyond_checkpoint')
  // Receipts without a checkpoint cannot be anchored.
  t.equal(await reasonOf(text([lines[0] as string, ...lines.slice(2)])), 'checkpoint_missing')
  // Whitespace changes nothing semantically but is still an edit.
  const spaced = [...lines]
  spaced[3] = (spaced[3] as string).replace(':', ': ')
  t.equal(await reasonOf(text(spaced)), 'body_mismatch')
  t.equal(await reasonOf(Buffer.alloc(0)), 'malformed')
  // Added bytes the decoder would drop, or a last line cut of its newline, are edits too.
  t.equal(await reasonOf(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), text(lines)])), 'malformed')
  t.equal(await reasonOf(text(lines).subarray(0, -1)), 'malformed')
  // Cut after its header, an export proves nothing: no tenant log is empty (its first key is receipted).
  t.equal(await reasonOf(text([exportHeaderLine(TENANT)])), 'checkpoint_missing')
})

t.test('checkpoint signatures: the message is the JCS of {tenantId, seq, hash, at}', async (t) => {
  const cp = { tenantId: 'ten_a', seq: 3, hash: 'ab'.repeat(32), at: 1_800_000_000 }
  t.equal(
    checkpointMessage(cp).toString(),
    `{"at":1800000000,"hash":"${'ab'.repeat(32)}","seq":3,"tenantId":"ten_a"}`,
  )
  const signed = signCheckpoint(signer.privateKey, cp)
  t.equal(checkpointSignatureValid(signer.publicKey, signed), true)
  t.equal(checkpointSignatureValid(signer.publicKey, { ...signed, seq: 4 }), false)
  t.equal(checkpointSignatureValid(intruder.publicKey, signed), false)
  // The raw base64 form of the public key parses to the same key.
  const raw = rawPublicKey(signer.publicKey).toString('base64')
  t.equal(publicKeyPem(parseEd25519PublicKey(raw)), publicKeyPem(signer.publicKey))
  t.same(decodeStrictBase64('YQ=='), Buffer.from('a'))
  t.equal(decodeStrictBase64('YR=='), null, 'non-canonical trailing bits are refused')
})

t.test('the chain verifier checks stored rows against their columns', async (t) => {
  const drafts = fc.sample(draftArb(TENANT), 3)
  const { receipts, bodies } = chainReceipts(EMPTY_HEAD, drafts)
  const rows = receipts.map((r, i) => ({
    seq: r.seq,
    tenantId: r.tenantId,
    receiptId: r.receiptId,
    kind: r.kind,
    decision: r.decision,
    createdAt: r.createdAt,
    body: bodies[i] as string,
    hash: r.hash,
  }))
  const ok = new ChainVerifier(TENANT, null)
  for (const row of rows) t.equal(ok.pushStored(row), null)
  t.equal(ok.finish(ok.head), null)
  const lying = new ChainVerifier(TENANT, null)
  lying.pushStored(rows[0]!)
  const f = lying.pushStored({ ...rows[1]!, decision: rows[1]!.decision === 'ALLOW' ? 'DENY' : 'ALLOW' })
  t.equal(f?.reason, 'body_mismatch')
})
