/** A sponsor grant the agent presents with a write (`grt_…`); never passed upstream. */
export const GRANT_HEADER = 'x-writegate-grant'
/** The receipt that authorised a write: sent to the upstream, and on the answer relayed to the agent. */
export const RECEIPT_HEADER = 'x-writegate-receipt'
