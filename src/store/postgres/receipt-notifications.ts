import type { Sql } from 'postgres'
import { RECEIPTS_CHANNEL } from './receipt-store.js'

/**
 * LISTEN on the receipts channel (on the driver's own dedicated connection, which it
 * re-establishes and re-listens after a drop). The payload is the tenant id.
 */
export function listenForReceipts(sql: Sql) {
  return async (onTenant: (tenantId: string) => void, onListen: () => void): Promise<() => Promise<void>> => {
    const l = await sql.listen(RECEIPTS_CHANNEL, onTenant, onListen)
    return () => l.unlisten()
  }
}
