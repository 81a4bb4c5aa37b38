import { Readable } from 'node:stream'
import { exportCheckpointLine, exportHeaderLine, receiptJsonFromStored } from '../core/audit-export.js'
import type { SignedCheckpoint } from '../core/checkpoint.js'
import type { ReceiptReader } from '../store/ports/receipt-reader.js'

/**
 * The export of a tenant's log up to a signed checkpoint (docs/audit.md "Export"), as a
 * Readable that reads one page of rows per pull: a slow client holds back the reads
 * instead of the process buffering the log.
 */
export function exportLogStream(
  reader: ReceiptReader,
  tenantId: string,
  checkpoint: SignedCheckpoint | null,
  pageSize = 1000,
): Readable {
  async function* lines(): AsyncGenerator<string> {
    yield `${exportHeaderLine(tenantId)}\n`
    if (!checkpoint) return
    yield `${exportCheckpointLine(checkpoint)}\n`
    let cursor = 0
    while (cursor < checkpoint.seq) {
      const rows = await reader.rows(tenantId, cursor, checkpoint.seq, pageSize)
      if (rows.length === 0) return
      let chunk = ''
      for (const r of rows) chunk += `${receiptJsonFromStored(r.body, r.hash)}\n`
      yield chunk
      cursor = (rows.at(-1) as (typeof rows)[number]).seq
    }
  }
  return Readable.from(lines(), { objectMode: false })
}
