import type { KeyObject } from 'node:crypto'
import { type ChainFailure, ChainVerifier } from './chain-verifier.js'
import { CHECKPOINT_ALGORITHM, type SignedCheckpoint } from './checkpoint.js'
import { canonicalJson, isCanonicalText } from './jcs.js'
import type { ChainHead } from './receipt.js'

/**
 * The audit export: JSON Lines, every line the RFC 8785 canonical JSON of one record.
 *
 *   line 1      {"format":"writegate-audit-export","tenantId":…,"type":"header","version":1}
 *   line 2      {"algorithm":"Ed25519","at":…,"hash":…,"keyId":…,"seq":…,"signature":…,"tenantId":…,"type":"checkpoint"}
 *   line 3…     one receipt per line, seq 1, 2, 3, … (the receipt itself, with its hash)
 *
 * The checkpoint signs the head the export ends at, so a missing tail is detected. A tenant's
 * log is never empty (its creation is receipted with its first key), so an export without a
 * checkpoint is refused, the header alone included: cut after line 1, an export would otherwise
 * verify as an empty log. Because every line must be canonical, any edited byte
 * either breaks a hash or a signature, or makes its line non-canonical.
 */
export const EXPORT_FORMAT = 'writegate-audit-export'
export const EXPORT_VERSION = 1

export function exportHeaderLine(tenantId: string): string {
  return canonicalJson({ type: 'header', format: EXPORT_FORMAT, version: EXPORT_VERSION, tenantId })
}

export function exportCheckpointLine(cp: SignedCheckpoint): string {
  return canonicalJson({
    type: 'checkpoint',
    algorithm: CHECKPOINT_ALGORITHM,
    tenantId: cp.tenantId,
    seq: cp.seq,
    hash: cp.hash,
    at: cp.at,
    signature: cp.signature,
    keyId: cp.keyId,
  })
}

/** A receipt line from the stored body (the JCS text that was hashed) and its hash. */
export function receiptJsonFromStored(body: string, hash: string): string {
  return canonicalJson({ ...(JSON.parse(body) as Record<string, unknown>), hash })
}

export interface ExportVerdict {
  valid: boolean
  tenantId: string | null
  /** Receipts verified. */
  checked: number
  head: ChainHead
  checkpoint: SignedCheckpoint | null
  failure: ChainFailure | null
}

const HEADER_KEYS = ['format', 'tenantId', 'type', 'version']
const CHECKPOINT_KEYS = ['algorithm', 'at', 'hash', 'keyId', 'seq', 'signature', 'tenantId', 'type']

function sameKeys(value: Record<string, unknown>, keys: string[]): boolean {
  const own = Object.keys(value).sort()
  return own.length === keys.length && own.every((k, i) => k === keys[i])
}

/** Verifies an export one line at a time (lines without their newline), so files of any size stream through. */
export class ExportVerifier {
  #line = 0
  #tenantId: string | null = null
  #chain: ChainVerifier | null = null
  #checkpoint: SignedCheckpoint | null = null
  #failure: ChainFailure | null = null

  constructor(private readonly publicKey: KeyObject) {}

  get lines(): number {
    return this.#line
  }
  get checked(): number {
    return this.#chain?.checked ?? 0
  }

  line(text: string): ChainFailure | null {
    this.#line += 1
    if (this.#failure) return this.#failure
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch {
      return this.#fail('malformed', `line ${this.#line} is not JSON`)
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      return this.#fail('malformed', `line ${this.#line} is not a JSON object`)
    }
    const record = value as Record<string, unknown>
    if (this.#line === 1) return this.#header(record, text)
    const chain = this.#chain as ChainVerifier
    if (record.type !== undefined) {
      if (record.type === 'checkpoint' && this.#line === 2) return this.#expectCheckpoint(record, text)
      return this.#fail('malformed', `line ${this.#line}: unexpected record`)
    }
    const failure = chain.pushExported(record, text)
    if (failure) return this.#adopt(failure)
    const cp = this.#checkpoint
    if (cp && chain.head.seq > cp.seq) {
      return this.#fail(
        'beyond_checkpoint',
        `seq ${chain.head.seq} lies beyond the signed checkpoint (seq ${cp.seq})`,
        chain.head.seq,
      )
    }
    return null
  }

  /**
   * The next line runs past `maxBytes` before its newline: the verdict, failed. No line the
   * exporter writes is that long, and holding one whole to parse it would take memory without end.
   */
  lineTooLong(maxBytes: number): ExportVerdict {
    // The line that fails is the one not yet read.
    if (!this.#failure)
      this.#failure = {
        ...this.#fail('malformed', `line ${this.#line + 1} is longer than ${maxBytes} bytes`),
        line: this.#line + 1,
      }
    return this.finish()
  }

  /** The file ended without its last line's newline: the verdict, failed if nothing failed first. */
  unterminated(): ExportVerdict {
    if (!this.#failure) this.#fail('malformed', `line ${this.#line} does not end in a newline`)
    return this.finish()
  }

  finish(): ExportVerdict {
    const chain = this.#chain
    if (!this.#failure) {
      if (!chain) this.#fail('malformed', 'the file is empty')
      else {
        const failure = chain.finish()
        // Found at the end of the file (cut short, a head or checkpoint not reached): no line
        // holds the fault, and the last one, which holds the receipt before it, would mislead.
        if (failure) this.#failure = failure
        else if (!this.#checkpoint) {
          this.#fail(
            'checkpoint_missing',
            chain.checked > 0
              ? 'the export holds receipts but no signed checkpoint'
              : 'the export holds no signed checkpoint and no receipt (a tenant log is never empty: cut short?)',
            1,
          )
        }
      }
    }
    return {
      valid: this.#failure === null,
      tenantId: this.#tenantId,
      checked: this.checked,
      head: chain?.head ?? { seq: 0, hash: '' },
      checkpoint: this.#checkpoint,
      failure: this.#failure,
    }
  }

  #header(record: Record<string, unknown>, text: string): ChainFailure | null {
    if (
      !sameKeys(record, HEADER_KEYS) ||
      record.type !== 'header' ||
      record.format !== EXPORT_FORMAT ||
      record.version !== EXPORT_VERSION ||
      typeof record.tenantId !== 'string' ||
      !isCanonicalText(record, text)
    ) {
      return this.#fail('malformed', `line 1 is not a ${EXPORT_FORMAT} v${EXPORT_VERSION} header`)
    }
    this.#tenantId = record.tenantId
    this.#chain = new ChainVerifier(record.tenantId, this.publicKey)
    return null
  }

  #expectCheckpoint(record: Record<string, unknown>, text: string): ChainFailure | null {
    const { tenantId, seq, hash, at, signature, keyId } = record
    if (
      !sameKeys(record, CHECKPOINT_KEYS) ||
      record.algorithm !== CHECKPOINT_ALGORITHM ||
      typeof tenantId !== 'string' ||
      typeof seq !== 'number' ||
      !Number.isSafeInteger(seq) ||
      seq < 1 ||
      typeof hash !== 'string' ||
      typeof at !== 'number' ||
      typeof signature !== 'string' ||
      typeof keyId !== 'string' ||
      !isCanonicalText(record, text)
    ) {
      return this.#fail('malformed', 'line 2 is not a well-formed checkpoint')
    }
    const cp: SignedCheckpoint = { tenantId, seq, hash, at, signature, keyId }
    const failure = (this.#chain as ChainVerifier).expectCheckpoint(cp)
    if (failure) return this.#adopt(failure)
    this.#checkpoint = cp
    return null
  }

  #adopt(failure: ChainFailure): ChainFailure {
    this.#failure = { ...failure, line: this.#line }
    return this.#failure
  }

  #fail(reason: ChainFailure['reason'], message: string, seq?: number): ChainFailure {
    this.#failure = {
      seq: seq ?? (this.#chain?.head.seq ?? 0) + 1,
      reason,
      message,
      line: this.#line,
    }
    return this.#failure
  }
}
