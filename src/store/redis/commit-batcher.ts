/** One commit's part of a batched COMMIT script call: its KEYS and ARGV. */
export interface BatchedCommit {
  keys: string[]
  args: (string | number)[]
}

type Send = (keys: string[], args: (string | number)[]) => Promise<unknown>

interface Waiting extends BatchedCommit {
  resolve(result: string[]): void
  reject(err: unknown): void
}

/** A tenant's commits not yet sent, and whether one of its script calls is on its way. */
interface Queue {
  waiting: Waiting[]
  inFlight: boolean
}

/**
 * Groups a process's commits into one script call per tenant, so a busy proxy pays one Redis
 * round trip (one write, one reply, one script run) for many requests instead of one each.
 * Every commit keeps its own version check, quota count and grant consumption inside the
 * script; batching changes only how they travel.
 *
 * A tenant has at most one call in flight; what arrives meanwhile waits for it and goes in the
 * next (group commit, as a database's log does). An idle tenant's commit goes once the current
 * I/O phase is done (setImmediate), so a lone request waits for nothing but the rest of the turn
 * it arrived in; under load the batch grows with Redis's round trip instead of each request
 * paying a round trip of its own: fewer syscalls, commands and replies per write.
 */
export function createCommitBatcher(send: Send, maxBatch: number) {
  const queues = new Map<string, Queue>()
  let scheduled = false

  function schedule(): void {
    if (scheduled) return
    scheduled = true
    setImmediate(flush)
  }

  function sendBatch(batch: Waiting[]): Promise<void> {
    const keys: string[] = []
    const args: (string | number)[] = [batch.length]
    for (const c of batch) {
      for (const k of c.keys) keys.push(k)
      for (const a of c.args) args.push(a)
    }
    // A send that throws instead of rejecting must still settle its batch and end the flight.
    let sent: Promise<unknown>
    try {
      sent = send(keys, args)
    } catch (err) {
      sent = Promise.reject(err)
    }
    return sent.then(
      (results) => {
        if (!Array.isArray(results) || results.length !== batch.length) {
          const err = new Error(`commit script answered ${String(results)} for ${batch.length} commits`)
          for (const c of batch) c.reject(err)
          return
        }
        for (let i = 0; i < batch.length; i++) (batch[i] as Waiting).resolve(results[i] as string[])
      },
      (err) => {
        for (const c of batch) c.reject(err)
      },
    )
  }

  function flush(): void {
    scheduled = false
    for (const [tenantId, queue] of queues) {
      if (queue.inFlight) continue
      const all = queue.waiting
      if (all.length === 0) {
        queues.delete(tenantId)
        continue
      }
      queue.waiting = []
      queue.inFlight = true
      // A cap keeps one script call short: Redis runs nothing else while it runs. Past the cap
      // the rest go at once, in calls of their own: the flight is over when the last settles.
      const calls: Promise<void>[] = []
      for (let i = 0; i < all.length; i += maxBatch) calls.push(sendBatch(all.slice(i, i + maxBatch)))
      const landed = () => {
        queue.inFlight = false
        if (queue.waiting.length > 0) schedule()
        else if (queues.get(tenantId) === queue) queues.delete(tenantId)
      }
      // Each call settles its own commits; the flight ends however it went.
      const flight = calls.length === 1 ? (calls[0] as Promise<void>) : Promise.all(calls)
      flight.then(landed, landed)
    }
  }

  return {
    /** Resolves with this commit's own result row from the script. */
    commit(tenantId: string, commit: BatchedCommit): Promise<string[]> {
      return new Promise((resolve, reject) => {
        let queue = queues.get(tenantId)
        if (!queue) {
          queue = { waiting: [], inFlight: false }
          queues.set(tenantId, queue)
        }
        queue.waiting.push({ keys: commit.keys, args: commit.args, resolve, reject })
        if (!queue.inFlight) schedule()
      })
    },
  }
}
