/** ioredis's own messages for a command it could not send or whose answer never came. */
const CLIENT_MESSAGES = new Set([
  'Connection is closed.',
  'Command timed out',
  "Stream isn't writeable and enableOfflineQueue options is false",
  "Cluster isn't ready and enableOfflineQueue options is false",
  // A cluster mid-failover, or whose nodes are all away.
  'Cluster is disconnected.',
  'None of startup nodes is available',
  'Node is disconnected',
])

/** A cluster that kept redirecting a command (a failover moving slots): ioredis's own wording. */
const REDIRECTIONS = 'Too many Cluster redirections.'

/** ioredis's errors for a connection given up on. */
const CLIENT_ERRORS = new Set(['MaxRetriesPerRequestError', 'ClusterAllFailedError'])

/**
 * Redis's answers of a server that cannot take writes or commands now: a replica after a
 * failover (READONLY), a server loading its data (LOADING), a replica whose master is away
 * (MASTERDOWN), a cluster without a master for the slot (CLUSTERDOWN, TRYAGAIN), a server
 * running a long script (BUSY), out of memory (OOM) or unable to persist (MISCONF).
 */
const SERVER_STATES = /^(READONLY|LOADING|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|BUSY|OOM|MISCONF) /

/**
 * Whether an error means Redis could not be reached or could not serve the command now, so
 * the request failed for a reason of the service's, not the client's: a 503, not a 500.
 * `test/contract/hot-store-unavailable.test.ts` provokes each from a real ioredis, so a
 * release that rewords one fails there.
 */
export function isHotStoreUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false
  if (CLIENT_ERRORS.has(err.name) || CLIENT_MESSAGES.has(err.message)) return true
  if (err.message.startsWith(REDIRECTIONS)) return true
  return err.name === 'ReplyError' && SERVER_STATES.test(err.message)
}
