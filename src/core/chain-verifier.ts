import type { KeyObject } from 'node:crypto'
import { type Checkpoint, checkpointSignatureValid, type SignedCheckpoint } from './checkpoint.js'
import { canonicalJson, isCanonicalText } from './jcs.js'
import { type ChainHead, EMPTY_HEAD } from './receipt.js'
import { sha256Hex } from './secret-hash.js'

/**
 * Why a chain failed verification. Shared by GET /v1/receipts/verify (over stored rows)
 * and the offline verifier (over an export file); docs/audit.md explains each one.
 */
export type ChainFailureReason =
  | 'malformed'
  | 'tenant_mismatch'
  | 'seq_gap'
  | 'hash_mismatch'
  | 'prev_hash_mismatch'
  | 'body_mismatch'
  | 'checkpoint_mismatch'
  | 'checkpoint_signature_invalid'
  | 'checkpoint_missing'
  | 'beyond_checkpoint'
  | 'truncated'
  | 'head_mismatch'

export interface ChainFailure {
  /** The first seq that does not verify (for a missing tail: the first missing seq). */
  seq: number
  reason: ChainFailureReason
  message: string
  /** Export files only: the 1-based line that failed. */
  line?: number
}

/** A receipt row as stored: the exact JCS text that was hashed, its hash, and the columns indexed beside it. */
export interface StoredReceiptRow {
  seq: number
  tenantId: string
  receiptId: string
  kind: string
  decision: string | null
  createdAt: number
  body: string
  hash: string
}

const HEX64 = /^[0-9a-f]{64}$/

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/**
 * Incremental verifier of one tenant's chain: feed receipts in seq order (and the
 * checkpoints that cover them, before those receipts), then call finish(). Holds only
 * the running head and the pending checkpoints, so a log of any length streams through.
 * The first failure sticks; later input is ignored.
 */
export class ChainVerifier {
  #seq: number
  #hash: string
  #checked = 0
  #failure: ChainFailure | null = null
  #pending: SignedCheckpoint[] = []
  #anchor: Checkpoint | null = null

  /**
   * @param publicKey checkpoints' signatures are checked with it; null skips that check.
   * @param start the head before the first receipt fed (the genesis head by default).
   */
  constructor(
    readonly tenantId: string,
    private readonly publicKey: KeyObject | null,
    start: ChainHead = EMPTY_HEAD,
  ) {
    this.#seq = start.seq
    this.#hash = start.hash
  }

  get failure(): ChainFailure | null {
    return this.#failure
  }
  /** Receipts verified so far. */
  get checked(): number {
    return this.#checked
  }
  get head(): ChainHead {
    return { seq: this.#seq, hash: this.#hash }
  }
  /** The latest checkpoint that matched the chain. */
  get anchor(): Checkpoint | null {
    return this.#anchor
  }

  /** Registers a checkpoint; its signature is checked now, its hash when its seq is reached. */
  expectCheckpoint(cp: SignedCheckpoint): ChainFailure | null {
    if (this.#failure) return this.#failure
    if (cp.tenantId !== this.tenantId) {
      return this.#fail(
        cp.seq,
        'tenant_mismatch',
        `the checkpoint at seq ${cp.seq} belongs to another tenant`,
      )
    }
    if (this.publicKey && !checkpointSignatureValid(this.publicKey, cp)) {
      return this.#fail(
        cp.seq,
        'checkpoint_signature_invalid',
        `the checkpoint at seq ${cp.seq} is not signed by this public key`,
      )
    }
    if (cp.seq < this.#seq) throw new Error('a checkpoint must be registered before the receipts it covers')
    if (cp.seq === this.#seq) return this.#match(cp)
    const at = this.#pending.findIndex((p) => p.seq > cp.seq)
    this.#pending.splice(at === -1 ? this.#pending.length : at, 0, cp)
    return null
  }

  /** A stored row: the body must hash to the row's hash, link to the previous one, and agree with its columns. */
  pushStored(row: StoredReceiptRow): ChainFailure | null {
    if (this.#failure) return this.#failure
    const expected = this.#seq + 1
    if (row.seq !== expected)
      return this.#fail(expected, 'seq_gap', `expected seq ${expected}, found ${row.seq}`)
    let body: unknown
    try {
      body = JSON.parse(row.body)
    } catch {
      return this.#fail(row.seq, 'body_mismatch', `the stored body of seq ${row.seq} is not JSON`)
    }
    if (!isPlainObject(body)) {
      return this.#fail(row.seq, 'body_mismatch', `the stored body of seq ${row.seq} is not an object`)
    }
    const linkFailure = this.#link(row.seq, body, row.body, row.hash)
    if (linkFailure) return linkFailure
    if (!isCanonicalText(body, row.body)) {
      return this.#fail(row.seq, 'body_mismatch', `the stored body of seq ${row.seq} is not canonical JSON`)
    }
    const columns: [string, unknown, unknown][] = [
      ['seq', body.seq, row.seq],
      ['tenantId', body.tenantId, row.tenantId],
      ['receiptId', body.receiptId, row.receiptId],
      ['kind', body.kind, row.kind],
      ['decision', body.decision ?? null, row.decision],
      ['createdAt', body.createdAt, row.createdAt],
    ]
    for (const [name, inBody, inColumn] of columns) {
      if (inBody !== inColumn) {
        return this.#fail(
          row.seq,
          'body_mismatch',
          `seq ${row.seq}: column ${name} disagrees with the hashed body`,
        )
      }
    }
    if (row.tenantId !== this.tenantId) {
      return this.#fail(row.seq, 'tenant_mismatch', `seq ${row.seq} belongs to another tenant`)
    }
    return this.#advance(row.seq, row.hash)
  }

  /** A receipt from an export: `lineText` must be exactly its canonical JSON, so no byte can change unnoticed. */
  pushExported(receipt: Record<string, unknown>, lineText: string): ChainFailure | null {
    if (this.#failure) return this.#failure
    const expected = this.#seq + 1
    const { seq, hash, ...body } = receipt
    if (typeof seq !== 'number' || !Number.isSafeInteger(seq)) {
      return this.#fail(expected, 'malformed', 'a receipt without an integer seq')
    }
    if (seq !== expected) return this.#fail(expected, 'seq_gap', `expected seq ${expected}, found ${seq}`)
    if (typeof hash !== 'string') return this.#fail(seq, 'malformed', `seq ${seq} has no hash`)
    if (!isCanonicalText(receipt, lineText)) {
      return this.#fail(seq, 'body_mismatch', `seq ${seq} is not canonical JSON (RFC 8785)`)
    }
    const linkFailure = this.#link(seq, { ...body, seq }, canonicalJson({ ...body, seq }), hash)
    if (linkFailure) return linkFailure
    if (body.tenantId !== this.tenantId) {
      return this.#fail(seq, 'tenant_mismatch', `seq ${seq} belongs to another tenant`)
    }
    return this.#advance(seq, hash)
  }

  /**
   * Ends the run. Every registered checkpoint must have been reached, and when the
   * recorded head is given, the chain must end exactly there.
   */
  finish(expectedHead?: ChainHead | null): ChainFailure | null {
    if (this.#failure) return this.#failure
    const next = this.#pending[0]
    if (next) {
      return this.#fail(
        this.#seq + 1,
        'truncated',
        `the log ends at seq ${this.#seq} but a signed checkpoint covers seq ${next.seq}`,
      )
    }
    if (expectedHead) {
      if (expectedHead.seq > this.#seq) {
        return this.#fail(
          this.#seq + 1,
          'truncated',
          `the log ends at seq ${this.#seq} but its head is seq ${expectedHead.seq}`,
        )
      }
      if (expectedHead.seq < this.#seq) {
        return this.#fail(
          expectedHead.seq + 1,
          'head_mismatch',
          `receipts beyond the recorded head (seq ${expectedHead.seq})`,
        )
      }
      if (expectedHead.hash !== this.#hash) {
        return this.#fail(this.#seq, 'head_mismatch', `the recorded head hash differs from seq ${this.#seq}`)
      }
    }
    return null
  }

  #link(seq: number, body: Record<string, unknown>, hashedText: string, hash: string): ChainFailure | null {
    const prevHash = body.prevHash
    if (typeof prevHash !== 'string' || !HEX64.test(prevHash)) {
      return this.#fail(seq, 'malformed', `seq ${seq} has no valid prevHash`)
    }
    // hash = sha256hex(prevHash + "\n" + JCS(receipt without hash)) (contract §5).
    if (sha256Hex(`${prevHash}\n${hashedText}`) !== hash) {
      return this.#fail(seq, 'hash_mismatch', `the hash of seq ${seq} does not match its content`)
    }
    if (prevHash !== this.#hash) {
      return this.#fail(seq, 'prev_hash_mismatch', `seq ${seq} does not link to the hash of seq ${seq - 1}`)
    }
    return null
  }

  #advance(seq: number, hash: string): ChainFailure | null {
    this.#seq = seq
    this.#hash = hash
    this.#checked += 1
    while (this.#pending[0] && this.#pending[0].seq === seq) {
      const failure = this.#match(this.#pending.shift() as SignedCheckpoint)
      if (failure) return failure
    }
    return null
  }

  #match(cp: SignedCheckpoint): ChainFailure | null {
    if (cp.hash !== this.#hash) {
      return this.#fail(
        cp.seq,
        'checkpoint_mismatch',
        `the chain's hash at seq ${cp.seq} differs from the signed checkpoint`,
      )
    }
    this.#anchor = { tenantId: cp.tenantId, seq: cp.seq, hash: cp.hash, at: cp.at }
    return null
  }

  #fail(seq: number, reason: ChainFailureReason, message: string): ChainFailure {
    this.#failure = { seq, reason, message }
    return this.#failure
  }
}
