import { generateKeyPairSync, type KeyObject } from 'node:crypto'
import fc from 'fast-check'
import { exportCheckpointLine, exportHeaderLine } from '../../src/core/audit-export.js'
import { signCheckpoint } from '../../src/core/checkpoint.js'
import { canonicalJson } from '../../src/core/jcs.js'
import { chainReceipts, draft, EMPTY_HEAD, RECEIPT_KINDS, type ReceiptDraft } from '../../src/core/receipt.js'

export function ed25519(): { privateKey: KeyObject; publicKey: KeyObject } {
  return generateKeyPairSync('ed25519')
}

let receiptCounter = 0

/** fast-check: a receipt draft for a tenant, with varied text (unicode included) and detail. */
export function draftArb(tenantId: string): fc.Arbitrary<ReceiptDraft> {
  return fc
    .record({
      n: fc.nat(),
      kind: fc.constantFrom(...RECEIPT_KINDS),
      decision: fc.constantFrom('ALLOW', 'DENY', 'STEP_UP', null),
      verb: fc.option(fc.string({ maxLength: 12 }), { nil: null }),
      target: fc.option(fc.string({ unit: 'grapheme', maxLength: 12 }), { nil: null }),
      reason: fc.option(fc.string({ maxLength: 20 }), { nil: null }),
      createdAt: fc.integer({ min: 1_700_000_000, max: 1_900_000_000 }),
      detail: fc.dictionary(
        fc.string({ maxLength: 6 }),
        fc.oneof(fc.integer(), fc.string({ maxLength: 8 }), fc.boolean()),
        { maxKeys: 3 },
      ),
    })
    .map(({ n, ...d }) => draft({ ...d, receiptId: `rcp_${n.toString(36)}x${++receiptCounter}`, tenantId }))
}

/** An export file's lines (header, checkpoint, receipts) for drafts chained from genesis. */
export function exportLines(tenantId: string, drafts: ReceiptDraft[], key: KeyObject, at = 1_800_000_000) {
  const { receipts, head } = chainReceipts(EMPTY_HEAD, drafts)
  const lines = [exportHeaderLine(tenantId)]
  if (receipts.length > 0) {
    lines.push(exportCheckpointLine(signCheckpoint(key, { tenantId, seq: head.seq, hash: head.hash, at })))
  }
  for (const r of receipts) lines.push(canonicalJson(r))
  return { lines, receipts }
}
