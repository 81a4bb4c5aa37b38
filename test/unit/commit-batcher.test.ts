import t from 'tap'
import { createCommitBatcher } from '../../src/store/redis/commit-batcher.js'

/** A script call the test answers by hand: which commits it carried, and how to settle it. */
interface Call {
  keys: string[]
  count: number
  answer(rows?: string[][]): void
  fail(err: Error): void
}

function harness(maxBatch = 64) {
  const calls: Call[] = []
  const batcher = createCommitBatcher(
    (keys, args) =>
      new Promise((resolve, reject) => {
        const count = Number(args[0])
        calls.push({
          keys,
          count,
          answer: (rows) => resolve(rows ?? Array.from({ length: count }, (_, i) => ['ok', String(i)])),
          fail: reject,
        })
      }),
    maxBatch,
  )
  const commit = (tenant: string, key: string) => batcher.commit(tenant, { keys: [key], args: [1] })
  return { calls, commit }
}
/** Two turns of the event loop: a call that lands schedules the next one for the turn after. */
const turn = async () => {
  await new Promise((r) => setImmediate(r))
  await new Promise((r) => setImmediate(r))
}

t.test('one call per tenant in flight: what arrives meanwhile goes together in the next', async (t) => {
  const { calls, commit } = harness()
  const first = commit('ten_a', 'k1')
  await turn()
  t.equal(calls.length, 1, 'an idle tenant’s commit goes at the end of the turn')
  const later = [commit('ten_a', 'k2'), commit('ten_a', 'k3'), commit('ten_a', 'k4')]
  await turn()
  await turn()
  t.equal(calls.length, 1, 'nothing more is sent while the first call is on its way')
  calls[0]?.answer()
  t.same(await first, ['ok', '0'])
  await turn()
  t.equal(calls.length, 2)
  t.same(calls[1]?.keys, ['k2', 'k3', 'k4'], 'the three waiting commits travel as one call')
  calls[1]?.answer()
  t.same(await Promise.all(later), [
    ['ok', '0'],
    ['ok', '1'],
    ['ok', '2'],
  ])
  commit('ten_a', 'k5')
  await turn()
  t.equal(calls.length, 3, 'idle again: the next commit goes at once')
  calls[2]?.answer()
})

t.test('another tenant is not held up by a tenant’s call in flight', async (t) => {
  const { calls, commit } = harness()
  commit('ten_a', 'a1')
  await turn()
  commit('ten_a', 'a2')
  const b = commit('ten_b', 'b1')
  await turn()
  t.same(
    calls.map((c) => c.keys),
    [['a1'], ['b1']],
  )
  calls[1]?.answer()
  t.same(await b, ['ok', '0'])
  calls[0]?.answer()
  await turn()
  t.same(calls[2]?.keys, ['a2'])
  calls[2]?.answer()
})

t.test('a failed call rejects its own commits; those waiting still go', async (t) => {
  const { calls, commit } = harness()
  const first = commit('ten_a', 'k1')
  await turn()
  const waiting = commit('ten_a', 'k2')
  calls[0]?.fail(new Error('READONLY'))
  await t.rejects(first, /READONLY/)
  await turn()
  t.same(calls[1]?.keys, ['k2'])
  calls[1]?.answer()
  t.same(await waiting, ['ok', '0'])
})

t.test('an answer of the wrong length rejects every commit of its call', async (t) => {
  const { calls, commit } = harness()
  const both = [commit('ten_a', 'k1'), commit('ten_a', 'k2')]
  await turn()
  calls[0]?.answer([['ok']])
  for (const p of both) await t.rejects(p, /answered/)
})

t.test(
  'past the cap, the rest go at once in calls of their own; the flight ends when all land',
  async (t) => {
    const { calls, commit } = harness(2)
    const five = ['k1', 'k2', 'k3', 'k4', 'k5'].map((k) => commit('ten_a', k))
    await turn()
    t.same(
      calls.map((c) => c.keys),
      [['k1', 'k2'], ['k3', 'k4'], ['k5']],
    )
    const sixth = commit('ten_a', 'k6')
    calls[0]?.answer()
    calls[1]?.answer()
    await turn()
    t.equal(calls.length, 3, 'one call of the flight is still out')
    calls[2]?.answer()
    await Promise.all(five)
    await turn()
    t.same(calls[3]?.keys, ['k6'])
    calls[3]?.answer()
    t.same(await sixth, ['ok', '0'])
  },
)

t.test('a send that throws instead of rejecting fails its own commits; the tenant goes on', async (t) => {
  let throwing = true
  const calls: string[][] = []
  const batcher = createCommitBatcher((keys, args) => {
    if (throwing) throw new Error('send threw')
    calls.push(keys)
    return Promise.resolve(Array.from({ length: Number(args[0]) }, () => ['ok']))
  }, 64)
  const first = batcher.commit('ten_a', { keys: ['k1'], args: [1] })
  await t.rejects(first, /send threw/)
  throwing = false
  t.same(
    await batcher.commit('ten_a', { keys: ['k2'], args: [1] }),
    ['ok'],
    'not stuck behind the failed flight',
  )
  t.same(calls, [['k2']])
})
