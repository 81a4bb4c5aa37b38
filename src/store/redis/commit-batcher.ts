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

/**
 * Groups the commits one process makes in one turn of its event loop into one script call
 * per tenant, so a busy proxy pays one Redis round trip (and one write, one reply) for many
 * requests instead of one each. Every commit keeps its own version check, quota count and
 * grant consumption inside the script; batching changes only how they travel. Commits are
 * sent once the current I/O phase is done (setImmediate): a lone request waits for nothing
 * but the rest of the turn it arrived in.
 */
export function createCommitBatcher(send: Send, maxBatch: number) {
  const waiting = new Map<string, Waiting[]>()
  let scheduled = false

  function sendBatch(batch: Waiting[]): void {
    const keys: string[] = []
    const args: (string | number)[] = [batch.length]
    for (const c of batch) {
      for (const k of c.keys) keys.push(k)
      for (const a of c.args) args.push(a)
    }
    send(keys, args).then(
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
    for (const [tenantId, all] of waiting) {
      waiting.delete(tenantId)
      // A cap keeps one script call short: Redis runs nothing else while it runs.
      for (let i = 0; i < all.length; i += maxBatch) sendBatch(all.slice(i, i + maxBatch))
    }
  }

  return {
    /** Resolves with this commit's own result row from the script. */
    commit(tenantId: string, commit: BatchedCommit): Promise<string[]> {
      return new Promise((resolve, reject) => {
        let list = waiting.get(tenantId)
        if (!list) {
          list = []
          waiting.set(tenantId, list)
        }
        list.push({ keys: commit.keys, args: commit.args, resolve, reject })
        if (!scheduled) {
          scheduled = true
          setImmediate(flush)
        }
      })
    },
  }
}
