import type { KeyObject } from 'node:crypto'
import { type ChainFailure, ChainVerifier } from '../core/chain-verifier.js'
import type { Checkpoint } from '../core/checkpoint.js'
import type { ChainHead } from '../core/receipt.js'
import type { CheckpointStore } from '../store/ports/checkpoints.js'
import type { ReceiptReader } from '../store/ports/receipt-reader.js'

export interface LogVerification {
  tenantId: string
  valid: boolean
  /** Receipts recomputed. */
  checked: number
  headSeq: number
  headHash: string
  from: number
  to: number
  /** The latest signed checkpoint in the range that matched the chain. */
  checkpoint: Checkpoint | null
  firstInvalidSeq?: number
  reason?: ChainFailure['reason']
  message?: string
}

export interface LogVerifierDeps {
  reader: ReceiptReader
  checkpoints: CheckpointStore
  publicKey: KeyObject
  /** Rows read per query. */
  pageSize?: number
}

/**
 * Recomputes a tenant's stored chain over seq [from, to] a page at a time: every row's
 * hash and link, its columns against its hashed body, every signed checkpoint in the
 * range (signature and hash) and, when the range reaches the head, the head row itself.
 */
export async function verifyStoredLog(
  deps: LogVerifierDeps,
  tenantId: string,
  range: { from?: number | undefined; to?: number | undefined },
  /** Stops reading (the promise rejects) once aborted: a client gone takes its verification with it. */
  signal?: AbortSignal,
): Promise<LogVerification> {
  const pageSize = deps.pageSize ?? 1000
  const head = await deps.reader.head(tenantId)
  const from = range.from ?? 1
  const to = Math.min(range.to ?? head.seq, head.seq)
  const result = (verifier: ChainVerifier | null, failure: ChainFailure | null): LogVerification => ({
    tenantId,
    valid: failure === null,
    checked: verifier?.checked ?? 0,
    headSeq: head.seq,
    headHash: head.hash,
    from,
    to,
    checkpoint: verifier?.anchor ?? null,
    ...(failure ? { firstInvalidSeq: failure.seq, reason: failure.reason, message: failure.message } : {}),
  })

  let start: ChainHead = { seq: 0, hash: '0'.repeat(64) }
  if (from > 1 && from <= to) {
    // Verification starts from the stored hash of the receipt before `from`.
    const [prev] = await deps.reader.rows(tenantId, from - 2, from - 1, 1)
    if (!prev) {
      return result(null, { seq: from - 1, reason: 'seq_gap', message: `seq ${from - 1} is missing` })
    }
    start = { seq: prev.seq, hash: prev.hash }
  }
  const verifier = new ChainVerifier(tenantId, deps.publicKey, start)
  if (from > to) {
    // Nothing to recompute. But a range that starts past the head's successor names receipts the
    // log no longer holds, and a signed checkpoint past the head means rows were removed from the
    // end: a monitor verifying from where it last stopped must learn of a truncated log (found in
    // review; the whole-log verification below already did).
    if (from > head.seq + 1)
      return result(verifier, {
        seq: head.seq + 1,
        reason: 'truncated',
        message: `the log ends at seq ${head.seq}, before seq ${from - 1}`,
      })
    const [cut] = await deps.checkpoints.range(tenantId, head.seq, Number.MAX_SAFE_INTEGER, 1)
    if (!cut) return result(verifier, await rowBeyondHead(deps.reader, tenantId, head.seq))
    return result(
      verifier,
      verifier.expectCheckpoint(cut) ?? {
        seq: head.seq + 1,
        reason: 'truncated',
        message: `the log ends at seq ${head.seq} but a signed checkpoint covers seq ${cut.seq}`,
      },
    )
  }

  let cpCursor = start.seq - 1
  let failure: ChainFailure | null = null
  let cursor = start.seq
  while (!failure && cursor < to) {
    signal?.throwIfAborted()
    const rows = await deps.reader.rows(tenantId, cursor, to, pageSize)
    if (rows.length === 0) break
    const last = (rows.at(-1) as (typeof rows)[number]).seq
    // Checkpoints are registered before the receipts they cover.
    for (;;) {
      const cps = await deps.checkpoints.range(tenantId, cpCursor, last, pageSize)
      for (const cp of cps) {
        failure = verifier.expectCheckpoint(cp)
        if (failure) break
      }
      if (failure || cps.length < pageSize) break
      cpCursor = (cps.at(-1) as (typeof cps)[number]).seq
    }
    cpCursor = Math.max(cpCursor, last)
    for (const row of rows) {
      if (failure) break
      failure = verifier.pushStored(row)
    }
    cursor = last
  }
  if (!failure && to === head.seq) {
    // Checkpoints beyond the stored rows mean rows were removed from the end.
    const beyond = await deps.checkpoints.range(tenantId, verifier.head.seq, Number.MAX_SAFE_INTEGER, 1)
    for (const cp of beyond) failure = verifier.expectCheckpoint(cp)
    failure ??= verifier.finish(head)
    failure ??= await rowBeyondHead(deps.reader, tenantId, head.seq)
  } else if (!failure && verifier.head.seq < to) {
    // Rows end before `to` although the head lies beyond it: the next seq is missing.
    const missing = verifier.head.seq + 1
    failure = { seq: missing, reason: 'seq_gap', message: `seq ${missing} is missing` }
  }
  return result(verifier, failure)
}

/**
 * A stored row past the head row: the chain does not end at the head (a row planted after it
 * lists and streams as a receipt, and blocks the tenant's next append). Found in review: the
 * range stopped at the head, so such a row was never read.
 */
async function rowBeyondHead(
  reader: ReceiptReader,
  tenantId: string,
  headSeq: number,
): Promise<ChainFailure | null> {
  const [row] = await reader.rows(tenantId, headSeq, Number.MAX_SAFE_INTEGER, 1)
  return row
    ? {
        seq: row.seq,
        reason: 'head_mismatch',
        message: `a receipt is stored at seq ${row.seq}, past the recorded head (seq ${headSeq})`,
      }
    : null
}
