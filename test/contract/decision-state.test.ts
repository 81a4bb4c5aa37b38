import t, { type Test } from 'tap'
import { newId } from '../../src/core/ids.js'
import type { CustomVerb } from '../../src/core/verbs.js'
import type {
  GrantRecord,
  Lease,
  PendingAction,
  SnapshotSource,
  StoredLayer,
  SystemOfRecord,
} from '../../src/store/ports/index.js'
import type { Database } from '../../src/store/postgres/connect.js'
import { createSnapshotSource } from '../../src/store/postgres/snapshot-source.js'
import { createSystemOfRecord } from '../../src/store/postgres/system-of-record.js'
import { FakeDatabase } from '../fakes/fake-database.js'
import { createFakeSnapshotSource } from '../fakes/fake-snapshot-source.js'
import { createFakeSystemOfRecord } from '../fakes/fake-system-of-record.js'
import { ALL_BACKENDS, openTestDatabase } from '../helpers/backends.js'

/** What the suite runs against: a real adapter (with its database) or the fakes. */
interface Subject {
  sor: SystemOfRecord
  snapshots: SnapshotSource
  /** The real adapter's database; null for the fakes, which have no SQL to check. */
  db: Database | null
}

async function subject(t: Test, kind: (typeof ALL_BACKENDS)[number] | 'fake'): Promise<Subject> {
  if (kind === 'fake') {
    const db = new FakeDatabase()
    return { sor: createFakeSystemOfRecord(db), snapshots: createFakeSnapshotSource(db), db: null }
  }
  const tdb = await openTestDatabase(kind)
  t.teardown(() => tdb.close())
  return { sor: createSystemOfRecord(tdb.db), snapshots: createSnapshotSource(tdb.db), db: tdb.db }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** Sorted copies, for what the stores return without an ORDER BY. */
const byLayer = (ls: StoredLayer[]) =>
  [...ls].sort((x, y) => `${x.scope}/${x.scopeKey}`.localeCompare(`${y.scope}/${y.scopeKey}`))

/**
 * The decision-state stores (policy layers, verbs, grants, leases, pending actions, sandbox
 * grants) and the snapshot source, run against every backend and against the fakes the service
 * tests run on (test/fakes), so they cannot drift apart (Cerbos-style TestSuite(store)).
 */
for (const kind of [...ALL_BACKENDS, 'fake'] as const) {
  t.test(`decision state contract: ${kind}`, async (t) => {
    const { sor, snapshots, db: sqlDb } = await subject(t, kind)
    const s = sor.stores

    async function tenant(): Promise<string> {
      const id = newId('tenant')
      await s.tenants.create({ id, name: 'T', createdAt: 1, sponsorHash: `h-${id}` })
      return id
    }

    /**
     * Whether `p` is left waiting on a row lock (true) or settles without waiting (false). On a
     * real server the wait shows in pg_stat_activity; in the fakes a call that takes no lock
     * settles within a few turns of the event loop.
     */
    async function waitsOnLock(p: Promise<unknown>): Promise<boolean> {
      let settled = false
      p.then(
        () => {
          settled = true
        },
        () => {
          settled = true
        },
      )
      for (let i = 0; i < 300; i++) {
        if (settled) return false
        if (sqlDb) {
          const [w] = await sqlDb.sql<{ n: number }[]>`
            select count(*)::int as n from pg_stat_activity
            where wait_event_type = 'Lock' and datname = current_database() and pid <> pg_backend_pid()`
          if ((w?.n ?? 0) > 0) return true
          await sleep(10)
        } else {
          if (i >= 50) return true
          await new Promise((r) => setImmediate(r))
        }
      }
      throw new Error('the statement neither finished nor waited on a lock')
    }

    t.test('policies: a version per layer, +1 per write, the policy replaced whole', async (t) => {
      const a = await tenant()
      const b = await tenant()
      t.equal(await s.policies.get(a, 'tenant', ''), null, 'never configured')
      t.same(await s.policies.list(a), [])
      t.same(await s.policies.write(a, 'tenant', '', { refund: 'allow', wire: 'deny' }, 10), {
        scope: 'tenant',
        scopeKey: '',
        policy: { refund: 'allow', wire: 'deny' },
        version: 1,
        updatedAt: 10,
      })
      const second = await s.policies.write(a, 'tenant', '', { refund: 'step_up' }, 20)
      t.same(
        second,
        { scope: 'tenant', scopeKey: '', policy: { refund: 'step_up' }, version: 2, updatedAt: 20 },
        'replaced, not merged; the version advanced by one',
      )
      t.same(await s.policies.get(a, 'tenant', ''), second)
      t.equal((await s.policies.write(a, 'tenant', '', { refund: 'deny' }, 15)).version, 3)
      t.equal((await s.policies.get(a, 'tenant', ''))?.updatedAt, 15, 'updatedAt is the last write time')

      const prod = await s.policies.write(a, 'environment', 'prod', { wire: 'require_grant' }, 30)
      t.equal(prod.version, 1, 'each layer has its own version')
      const prn = await s.policies.write(a, 'principal', 'prn_1', { wire: 'allow' }, 31)
      t.equal(prn.version, 1)
      t.equal(await s.policies.get(a, 'environment', 'dev'), null, 'scope keys are distinct layers')
      t.equal(await s.policies.get(a, 'principal', 'prod'), null, 'scopes are distinct layers')
      t.same(
        byLayer(await s.policies.list(a)),
        byLayer([(await s.policies.get(a, 'tenant', ''))!, prod, prn]),
        'every configured layer of the tenant',
      )
      t.same(await s.policies.getForUpdate(a, 'environment', 'prod'), prod, 'outside a transaction too')

      t.equal(await s.policies.get(b, 'tenant', ''), null, "another tenant's layer is not seen")
      t.same(await s.policies.list(b), [])
      t.equal((await s.policies.write(b, 'tenant', '', { x: 'allow' }, 40)).version, 1, 'versions per tenant')
      t.equal((await s.policies.get(a, 'tenant', ''))?.version, 3, 'and untouched by it')
      await t.rejects(s.policies.write('ten_none', 'tenant', '', { x: 'allow' }, 1), 'no such tenant')
      await t.rejects(s.policies.write(a, 'bogus' as 'tenant', '', { x: 'allow' }, 1), 'no such scope')
      t.same(
        byLayer(await s.policies.list(a)).map((l) => l.version),
        [1, 1, 3],
        'nothing written by the refused writes',
      )
    })

    t.test('policies: getForUpdate in a transaction sees its own writes', async (t) => {
      const a = await tenant()
      await s.policies.write(a, 'tenant', '', { x: 'allow' }, 1)
      const seen = await sor.transaction(async (x) => {
        const before = await x.policies.getForUpdate(a, 'tenant', '')
        const written = await x.policies.write(a, 'tenant', '', { x: 'deny' }, 2)
        const after = await x.policies.getForUpdate(a, 'tenant', '')
        return { before, written, after }
      })
      t.match(seen.before, { version: 1, policy: { x: 'allow' } })
      t.same(seen.after, seen.written)
      t.match(seen.after, { version: 2, policy: { x: 'deny' } })
      t.equal(
        await sor.transaction((x) => x.policies.getForUpdate(a, 'environment', 'prod')),
        null,
        'an absent layer',
      )
    })

    // Only where transactions run side by side (PGlite runs them in turn, so none can wait on another).
    if (kind === 'fake' || sqlDb?.shared)
      t.test('policies: getForUpdate locks the layer to the end of the transaction', async (t) => {
        const a = await tenant()
        await s.policies.write(a, 'tenant', '', { x: 'allow' }, 1)
        let reader: Promise<StoredLayer | null> | undefined
        let writer: Promise<StoredLayer> | undefined
        await sor.transaction(async (x) => {
          t.equal(await x.policies.getForUpdate(a, 'environment', 'prod'), null)
          t.equal(
            await waitsOnLock(sor.transaction((y) => y.policies.getForUpdate(a, 'environment', 'prod'))),
            false,
            'an absent layer has no row to lock: another transaction does not wait',
          )
          t.equal((await x.policies.getForUpdate(a, 'tenant', ''))?.version, 1)
          reader = sor.transaction((y) => y.policies.getForUpdate(a, 'tenant', ''))
          t.equal(await waitsOnLock(reader), true, "another transaction's getForUpdate waits")
          await x.policies.write(a, 'tenant', '', { x: 'deny' }, 2)
        })
        t.match(await reader, { version: 2, policy: { x: 'deny' } }, 'and reads what the holder committed')

        await sor.transaction(async (x) => {
          await x.policies.getForUpdate(a, 'tenant', '')
          writer = s.policies.write(a, 'tenant', '', { x: 'step_up' }, 4)
          t.equal(await waitsOnLock(writer), true, 'a write waits too')
          await x.policies.write(a, 'tenant', '', { x: 'allow' }, 3)
        })
        t.match(await writer, { version: 4, policy: { x: 'step_up' } }, 'written after the holder committed')
        t.match(await s.policies.get(a, 'tenant', ''), { version: 4, policy: { x: 'step_up' }, updatedAt: 4 })
      })

    t.test('verbs: creation order, lowercase lookup, deprecation flattens aliases', async (t) => {
      const a = await tenant()
      const b = await tenant()
      const verb = (name: string, createdAt: number, extra: Partial<CustomVerb> = {}): CustomVerb => ({
        name,
        description: `d-${name}`,
        status: 'live',
        aliasOf: null,
        createdAt,
        deprecatedAt: null,
        ...extra,
      })
      t.same(await s.verbs.list(a), [])
      t.equal(await s.verbs.count(a), 0)
      await s.verbs.insert(a, verb('zeta', 10))
      await s.verbs.insert(a, verb('alpha', 5))
      await s.verbs.insert(b, verb('alpha', 1, { status: 'deprecated', aliasOf: 'beta', deprecatedAt: 2 }))
      t.same(
        await s.verbs.list(a),
        [verb('zeta', 10), verb('alpha', 5)],
        'in insertion order, not by name or time',
      )
      t.same(await s.verbs.get(a, 'ZeTa'), verb('zeta', 10), 'looked up lowercased')
      t.equal(await s.verbs.get(a, 'nope'), null)
      t.equal(await s.verbs.count(a), 2)
      t.equal(await s.verbs.count(b), 1, 'counted per tenant')
      await t.rejects(s.verbs.insert(a, verb('zeta', 11)), 'a name is taken once in the tenant')
      await t.rejects(s.verbs.insert('ten_none', verb('x', 1)), 'no such tenant')
      t.equal(await s.verbs.count(a), 2, 'nothing written by the refused inserts')

      await s.verbs.setDescription(a, 'zeta', 'new words')
      t.equal((await s.verbs.get(a, 'zeta'))?.description, 'new words')
      await s.verbs.setDescription(b, 'zeta', 'not mine')
      t.equal((await s.verbs.get(a, 'zeta'))?.description, 'new words', 'scoped by tenant')

      await s.verbs.insert(a, verb('beta', 20))
      await s.verbs.deprecate(a, 'alpha', 'beta', 21)
      t.same(
        await s.verbs.get(a, 'alpha'),
        verb('alpha', 5, { status: 'deprecated', aliasOf: 'beta', deprecatedAt: 21 }),
      )
      await s.verbs.insert(a, verb('gamma', 30))
      await s.verbs.deprecate(a, 'beta', 'gamma', 31)
      t.same(
        (await s.verbs.list(a)).map((v) => [v.name, v.status, v.aliasOf, v.deprecatedAt]),
        [
          ['zeta', 'live', null, null],
          ['alpha', 'deprecated', 'gamma', 21],
          ['beta', 'deprecated', 'gamma', 31],
          ['gamma', 'live', null, null],
        ],
        'the older alias re-pointed at the new live name',
      )
      t.equal((await s.verbs.get(b, 'alpha'))?.aliasOf, 'beta', "another tenant's alias is untouched")
    })

    t.test('verbs: the registry version advances only from the expected one', async (t) => {
      const a = await tenant()
      const b = await tenant()
      t.equal(await s.verbs.registryVersion(a), 0)
      t.equal(await s.verbs.advanceRegistry(a, 1), false, 'not from a version it is not at')
      t.equal(await s.verbs.advanceRegistry(a, 0), true)
      t.equal(await s.verbs.advanceRegistry(a, 0), false, 'a second advance from the same version')
      t.equal(await s.verbs.registryVersion(a), 1)
      t.equal(await s.verbs.advanceRegistry(a, 1), true)
      t.equal(await s.verbs.registryVersion(a), 2)
      t.equal(await s.verbs.registryVersion(b), 0, 'per tenant')
      t.equal((await s.tenants.get(a))?.version, 0, "not the tenant's decision-state version")
      t.equal(await s.verbs.registryVersion('ten_none'), 0)
      t.equal(await s.verbs.advanceRegistry('ten_none', 0), false)
      const raced = await Promise.all([s.verbs.advanceRegistry(b, 0), s.verbs.advanceRegistry(b, 0)])
      t.same(raced.sort(), [false, true], 'two concurrent advances from one version: one wins')
      t.equal(await s.verbs.registryVersion(b), 1)
    })

    t.test('grants: single use, unmarked only by the receipt that marked it, per tenant', async (t) => {
      const a = await tenant()
      const b = await tenant()
      const grant = (tenantId: string, expiresAt: number, extra: Partial<GrantRecord> = {}): GrantRecord => ({
        grantId: newId('grant'),
        tenantId,
        verb: 'refund',
        target: 'ord_1',
        principalId: 'prn_1',
        environment: 'prod',
        reason: 'because',
        createdAt: 10,
        expiresAt,
        ...extra,
      })
      const g1 = grant(a, 1000)
      const g2 = grant(a, 1000, { target: null, principalId: null, environment: null, reason: null })
      const expired = grant(a, 100)
      const other = grant(b, 1000)
      for (const g of [g1, g2, expired, other]) await s.grants.insert(g)
      await t.rejects(s.grants.insert({ ...g1, tenantId: b }), 'a grant id is taken across tenants')
      await t.rejects(s.grants.insert(grant('ten_none', 1000)), 'no such tenant')
      const live = async (tenantId = a, now = 100) =>
        ((await snapshots.read(tenantId, now))?.grants ?? []).map((g) => g.grantId).sort()

      t.same(await live(), [g1.grantId, g2.grantId].sort(), 'live: unconsumed, expiring after now')
      t.same(await live(a, 99), [g1.grantId, g2.grantId, expired.grantId].sort())
      t.same(await live(b), [other.grantId], 'per tenant')
      t.same(
        (await snapshots.read(a, 100))?.grants.find((g) => g.grantId === g2.grantId),
        {
          grantId: g2.grantId,
          verb: 'refund',
          target: null,
          principalId: null,
          environment: null,
          expiresAt: 1000,
        },
        'null fields kept null',
      )

      await s.grants.markConsumed(a, g1.grantId, 110, 'rcp_1')
      t.same(await live(), [g2.grantId], 'consumed: no longer live')
      await s.grants.markConsumed(a, g1.grantId, 120, 'rcp_2')
      await s.grants.unmarkConsumed(a, g1.grantId, 'rcp_2')
      t.same(await live(), [g2.grantId], 'a second mark changes nothing, so its receipt cannot unmark')
      await s.grants.unmarkConsumed(b, g1.grantId, 'rcp_1')
      t.same(await live(), [g2.grantId], "not unmarked through another tenant's id")
      if (sqlDb) {
        const [row] = await sqlDb.sql<{ consumed_at: number; consumed_by: string }[]>`
          select consumed_at, consumed_by from grants where id = ${g1.grantId}`
        t.same([Number(row?.consumed_at), row?.consumed_by], [110, 'rcp_1'], 'the first consumption is kept')
      }
      await s.grants.unmarkConsumed(a, g1.grantId, 'rcp_1')
      t.same(
        await live(),
        [g1.grantId, g2.grantId].sort(),
        'unmarked by the receipt that marked it: live again',
      )
      await s.grants.unmarkConsumed(a, g2.grantId, 'rcp_1')
      t.same(await live(), [g1.grantId, g2.grantId].sort(), 'unmarking an unconsumed grant changes nothing')
      await s.grants.markConsumed(a, g1.grantId, 130, 'rcp_3')
      await s.grants.unmarkConsumed(a, g1.grantId, 'rcp_1')
      t.same(await live(), [g2.grantId], 'consumed again: the earlier receipt no longer unmarks it')

      await s.grants.markConsumed(b, g2.grantId, 140, 'rcp_4')
      t.same(await live(), [g2.grantId], "not consumed through another tenant's id")
      await s.grants.markConsumed(a, 'grt_none', 140, 'rcp_4')

      t.equal(await s.grants.renameVerb(a, 'refund', 'repay'), 2, 'the unconsumed ones: live and expired')
      t.same(
        (await snapshots.read(a, 99))?.grants.map((g) => [g.grantId, g.verb]).sort(),
        [
          [g2.grantId, 'repay'],
          [expired.grantId, 'repay'],
        ].sort(),
      )
      await s.grants.unmarkConsumed(a, g1.grantId, 'rcp_3')
      t.same(
        (await snapshots.read(a, 100))?.grants.find((g) => g.grantId === g1.grantId)?.verb,
        'refund',
        'a consumed grant keeps its verb',
      )
      t.same(
        (await snapshots.read(b, 100))?.grants.map((g) => g.verb),
        ['refund'],
        "another tenant's grants keep theirs",
      )
      t.equal(await s.grants.renameVerb(a, 'refund', 'repay'), 1)
      t.equal(await s.grants.renameVerb(a, 'nothing', 'else'), 0)
    })

    t.test('leases: used once, per tenant; insertIfAbsent keeps the first', async (t) => {
      const a = await tenant()
      const b = await tenant()
      const lease = (tenantId: string, extra: Partial<Lease> = {}): Omit<Lease, 'usedAt'> => ({
        leaseId: newId('lease'),
        tenantId,
        keyId: 'key_1',
        principalId: 'prn_1',
        verb: 'refund',
        target: 'ord_1',
        systemId: 'sys_1',
        binding: 'POST /v1/refunds',
        createdAt: 10,
        expiresAt: 100,
        ...extra,
      })
      const l1 = lease(a)
      await s.leases.insert(l1)
      t.same(await s.leases.get(a, l1.leaseId), { ...l1, usedAt: null })
      t.equal(await s.leases.get(b, l1.leaseId), null, "another tenant's lease is not seen")
      t.equal(await s.leases.get(a, 'lse_none'), null)
      await t.rejects(s.leases.insert({ ...l1, binding: 'other' }), 'an id is inserted once')
      await t.rejects(s.leases.insert({ ...l1, tenantId: b }), 'an id is taken across tenants')
      await t.rejects(s.leases.insert(lease('ten_none')), 'no such tenant')
      await s.leases.insertIfAbsent({ ...l1, binding: 'other', target: null })
      await s.leases.insertIfAbsent({ ...l1, tenantId: b })
      t.same(await s.leases.get(a, l1.leaseId), { ...l1, usedAt: null }, 'the first insert stands')
      t.equal(await s.leases.get(b, l1.leaseId), null, 'not created for the other tenant either')
      const l2 = lease(a, { target: null })
      await s.leases.insertIfAbsent(l2)
      t.same(await s.leases.get(a, l2.leaseId), { ...l2, usedAt: null }, 'created when absent')

      t.equal(await s.leases.consume(b, l1.leaseId, 20), false, "not through another tenant's id")
      t.equal((await s.leases.get(a, l1.leaseId))?.usedAt, null)
      t.equal(await s.leases.consume(a, l1.leaseId, 30), true)
      t.equal(await s.leases.consume(a, l1.leaseId, 40), false, 'used once')
      t.equal((await s.leases.get(a, l1.leaseId))?.usedAt, 30, 'the first use is kept')
      t.equal(await s.leases.consume(a, 'lse_none', 40), false)
      await s.leases.insertIfAbsent(l1)
      t.equal(
        (await s.leases.get(a, l1.leaseId))?.usedAt,
        30,
        'a used lease is not renewed by insertIfAbsent',
      )

      const raced = await Promise.all(
        Array.from({ length: 5 }, (_, i) => s.leases.consume(a, l2.leaseId, 50 + i)),
      )
      t.equal(raced.filter(Boolean).length, 1, 'concurrent uses: exactly one wins')
      t.equal((await s.leases.get(a, l2.leaseId))?.usedAt, 50 + raced.indexOf(true))
    })

    t.test('actions: pending, unexpired, oldest first, paged strictly after a position', async (t) => {
      const a = await tenant()
      const b = await tenant()
      const base = newId('action')
      const action = (
        tenantId: string,
        suffix: string,
        createdAt: number,
        expiresAt = 1000,
      ): PendingAction => ({
        actionId: `${base}_${suffix}`,
        tenantId,
        systemId: 'sys_1',
        tool: 'refund',
        params: { amount: 5, nested: { list: [1, 'two', null], flag: true }, empty: {} },
        verb: 'refund',
        target: 'ord_1',
        environment: 'prod',
        principalId: 'prn_1',
        keyId: 'key_1',
        stagedReceiptId: `rcp_${suffix}`,
        createdAt,
        expiresAt,
      })
      const x1 = action(a, '2', 10)
      const x2 = action(a, '1', 10)
      const x3 = action(a, '3', 5)
      const x4 = { ...action(a, '4', 7, 100), revertOf: x3.actionId, systemVersion: 3 }
      const x5 = {
        ...action(a, '5', 20),
        target: null,
        environment: null,
        revertOf: null,
        systemVersion: null,
      }
      const y1 = action(b, '6', 1)
      for (const x of [x1, x2, x3, x4, x5, y1]) await s.actions.insert(x)
      const ids = (xs: PendingAction[]) => xs.map((x) => x.actionId)

      t.same(
        await s.actions.get(a, x1.actionId),
        { ...x1, revertOf: null, systemVersion: null },
        'as inserted',
      )
      t.same(await s.actions.get(a, x4.actionId), x4, 'with what it reverts and its system version')
      t.same(await s.actions.get(a, x5.actionId), x5)
      t.equal(await s.actions.get(b, x1.actionId), null, "another tenant's action is not seen")
      t.equal(await s.actions.get(a, 'act_none'), null)

      t.same(
        ids(await s.actions.list(a, 100, 10)),
        ids([x3, x2, x1, x5]),
        'by createdAt, then id; one expiring at now is gone',
      )
      t.same(ids(await s.actions.list(a, 99, 10)), ids([x3, x4, x2, x1, x5]), 'unexpired just before')
      t.same(ids(await s.actions.list(a, 1000, 10)), [], 'all expired')
      t.same(ids(await s.actions.list(b, 100, 10)), ids([y1]), 'per tenant')
      const page1 = await s.actions.list(a, 99, 2)
      t.same(ids(page1), ids([x3, x4]), 'at most limit')
      const last = page1[1]!
      const page2 = await s.actions.list(a, 99, 2, { createdAt: last.createdAt, actionId: last.actionId })
      t.same(ids(page2), ids([x2, x1]), 'strictly after the position')
      t.same(
        ids(await s.actions.list(a, 99, 10, { createdAt: 10, actionId: x2.actionId })),
        ids([x1, x5]),
        'after a position within one createdAt, by id',
      )
      t.same(
        ids(await s.actions.list(a, 99, 10, { createdAt: 9, actionId: 'zzz' })),
        ids([x2, x1, x5]),
        'a position that is no action',
      )
      t.same(ids(await s.actions.list(a, 99, 10, { createdAt: 20, actionId: x5.actionId })), [], 'the end')

      await t.rejects(s.actions.insert({ ...x1, tool: 'other' }), 'an id is inserted once')
      await t.rejects(s.actions.insert({ ...x1, tenantId: b }), 'an id is taken across tenants')
      await t.rejects(s.actions.insert(action('ten_none', '7', 1)), 'no such tenant')
      await s.actions.insertIfAbsent({ ...x1, params: { amount: 999 } })
      await s.actions.insertIfAbsent({ ...x1, tenantId: b })
      t.same((await s.actions.get(a, x1.actionId))?.params, x1.params, 'a redelivered insert changes nothing')
      t.equal(await s.actions.get(b, x1.actionId), null)
      const x8 = action(a, '8', 30)
      await s.actions.insertIfAbsent(x8)
      t.same(await s.actions.get(a, x8.actionId), { ...x8, revertOf: null, systemVersion: null })

      t.equal(await s.actions.remove(b, x1.actionId), false, "not through another tenant's id")
      t.ok(await s.actions.get(a, x1.actionId), 'still there')
      t.equal(await s.actions.remove(a, x1.actionId), true)
      t.equal(await s.actions.remove(a, x1.actionId), false, 'already gone')
      t.equal(await s.actions.get(a, x1.actionId), null)
      t.same(ids(await s.actions.list(a, 100, 10)), ids([x3, x2, x5, x8]))
      const raced = await Promise.all([s.actions.remove(a, x2.actionId), s.actions.remove(a, x2.actionId)])
      t.same(raced.sort(), [false, true], 'two concurrent removes: one removed it')
    })

    t.test('sandbox grants: inserted once, pruned at and after their expiry', async (t) => {
      const g = (expiresAt: number) => ({
        grantId: newId('grant'),
        verb: 'refund',
        target: 'demo',
        createdAt: 1,
        expiresAt,
      })
      const [g1, g2, g3] = [g(100), g(200), g(300)]
      for (const x of [g1, g2, g3]) await s.sandbox.insert(x)
      await t.rejects(s.sandbox.insert({ ...g1, expiresAt: 999 }), 'an id is inserted once')
      t.equal(await s.sandbox.pruneExpired(99), 0, 'none expired yet')
      t.equal(await s.sandbox.pruneExpired(200), 2, 'those expiring at or before now')
      t.equal(await s.sandbox.pruneExpired(200), 0, 'already pruned')
      await s.sandbox.insert(g1)
      await s.sandbox.insert(g2)
      await t.rejects(s.sandbox.insert(g3), 'the unexpired one was kept')
      t.equal(await s.sandbox.pruneExpired(1000), 3)
    })

    t.test('snapshot source: every part of the tenant, only of the tenant, at its version', async (t) => {
      const a = await tenant()
      const b = await tenant()
      t.equal(await snapshots.read('ten_none', 100), null, 'no such tenant')
      t.same(
        await snapshots.read(b, 100),
        {
          tenantId: b,
          version: 0,
          builtAt: 100,
          policies: { tenant: { policy: {}, version: 0, updatedAt: null }, environments: {}, principals: {} },
          verbs: [],
          principals: {},
          keys: {},
          roster: { all: false, principals: [], keys: [], lifted: { all: null, principals: {}, keys: {} } },
          grants: [],
          systems: [],
        },
        'an empty tenant',
      )

      const p = { id: newId('principal'), tenantId: a, name: 'bot', disabled: false, createdAt: 1 }
      await s.principals.create(p)
      const gone = { ...p, id: newId('principal'), name: 'gone' }
      await s.principals.create(gone)
      await s.principals.tombstone(a, gone.id, 5)
      const k = {
        id: newId('key'),
        tenantId: a,
        principalId: p.id,
        secretHash: `sh-${newId('key')}`,
        scope: 'agent' as const,
        email: 'e@x.io',
        createdAt: 2,
      }
      await s.keys.create(k)
      await s.roster.add(a, { kind: 'key', id: 'key_old' }, null, 50)
      await s.roster.add(a, { kind: 'principal', id: 'prn_lifted' }, null, 40)
      await s.roster.remove(a, { kind: 'principal', id: 'prn_lifted' }, 60)
      await s.verbs.insert(a, {
        name: 'refund',
        description: '',
        status: 'live',
        aliasOf: null,
        createdAt: 3,
        deprecatedAt: null,
      })
      await s.verbs.insert(a, {
        name: 'payout',
        description: 'x',
        status: 'live',
        aliasOf: null,
        createdAt: 1,
        deprecatedAt: null,
      })
      await s.policies.write(a, 'tenant', '', { refund: 'allow' }, 10)
      await s.policies.write(a, 'tenant', '', { refund: 'deny' }, 11)
      await s.policies.write(a, 'environment', 'prod', { refund: 'step_up' }, 12)
      await s.policies.write(a, 'principal', p.id, { payout: 'require_grant' }, 13)
      const system = {
        kind: 'http' as const,
        upstream: 'https://x.example',
        credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'X_TOKEN' },
        reads: 'pass' as const,
        routes: [{ method: 'POST' as const, path: '/v1/r', verb: 'refund' }],
        tools: [],
      }
      await s.systems.insert(a, 'sys_live', { systemId: 'sys_live', ...system }, 20)
      await s.systems.insert(a, 'sys_gone', { systemId: 'sys_gone', ...system }, 20)
      await s.systems.remove(a, 'sys_gone', 21)
      const grantId = newId('grant')
      await s.grants.insert({
        grantId,
        tenantId: a,
        verb: 'payout',
        target: null,
        principalId: p.id,
        environment: 'prod',
        reason: null,
        createdAt: 1,
        expiresAt: 500,
      })
      await s.tenants.bumpVersion(a)
      await s.tenants.bumpVersion(a)

      const snap = await snapshots.read(a, 100)
      t.match(snap, {
        tenantId: a,
        version: 2,
        builtAt: 100,
        policies: {
          tenant: { policy: { refund: 'deny' }, version: 2, updatedAt: 11 },
          environments: { prod: { policy: { refund: 'step_up' }, version: 1, updatedAt: 12 } },
          principals: { [p.id]: { policy: { payout: 'require_grant' }, version: 1, updatedAt: 13 } },
        },
        roster: { all: false, principals: [], keys: ['key_old'], lifted: { principals: { prn_lifted: 40 } } },
      })
      t.same(snap?.grants, [
        { grantId, verb: 'payout', target: null, principalId: p.id, environment: 'prod', expiresAt: 500 },
      ])
      t.same(Object.keys(snap?.policies.environments ?? {}), ['prod'])
      t.same(Object.keys(snap?.policies.principals ?? {}), [p.id])
      t.same(
        snap?.verbs.map((v) => v.name),
        ['refund', 'payout'],
        'verbs in creation order',
      )
      t.same(snap?.principals, {
        [p.id]: { name: 'bot', disabled: false, deleted: false, barredThrough: null },
        [gone.id]: { name: 'gone', disabled: false, deleted: true, barredThrough: null },
      })
      t.same(snap?.keys, { [k.id]: { principalId: p.id, revoked: false, scope: 'agent' } })
      t.same(
        snap?.systems.map((x) => x.systemId),
        ['sys_live'],
        'live systems only',
      )
      t.same(((await snapshots.read(a, 500))?.grants ?? []).length, 0, 'a grant expiring at now is not live')

      const bSnap = await snapshots.read(b, 100)
      t.same(
        [bSnap?.verbs, bSnap?.principals, bSnap?.keys, bSnap?.grants, bSnap?.systems, bSnap?.roster.keys],
        [[], {}, {}, [], [], []],
        "nothing of another tenant's",
      )
      t.equal(bSnap?.policies.tenant.version, 0)

      const versions = await snapshots.versions()
      t.same(
        versions.filter((v) => v.tenantId === a || v.tenantId === b).sort((x, y) => x.version - y.version),
        [
          { tenantId: b, version: 0 },
          { tenantId: a, version: 2 },
        ],
        'every tenant with its current version',
      )
      t.equal(new Set(versions.map((v) => v.tenantId)).size, versions.length, 'each tenant once')
    })

    t.test('a write in a transaction that throws is not visible, in any of the stores', async (t) => {
      const a = await tenant()
      await s.policies.write(a, 'tenant', '', { x: 'allow' }, 1)
      const grantId = newId('grant')
      await s.grants.insert({
        grantId,
        tenantId: a,
        verb: 'refund',
        target: null,
        principalId: null,
        environment: null,
        reason: null,
        createdAt: 1,
        expiresAt: 1000,
      })
      const lease = {
        leaseId: newId('lease'),
        tenantId: a,
        keyId: 'key_1',
        principalId: 'prn_1',
        verb: 'refund',
        target: null,
        systemId: 'sys_1',
        binding: 'b',
        createdAt: 1,
        expiresAt: 100,
      }
      await s.leases.insert(lease)
      const act = (actionId: string): PendingAction => ({
        actionId,
        tenantId: a,
        systemId: 'sys_1',
        tool: 't',
        params: {},
        verb: 'refund',
        target: null,
        environment: null,
        principalId: 'prn_1',
        keyId: 'key_1',
        stagedReceiptId: 'rcp_1',
        createdAt: 1,
        expiresAt: 1000,
      })
      const kept = act(newId('action'))
      await s.actions.insert(kept)
      const staged = act(newId('action'))
      const newLease = { ...lease, leaseId: newId('lease') }
      const sandboxId = newId('grant')

      await t.rejects(
        sor.transaction(async (x) => {
          t.equal((await x.policies.write(a, 'tenant', '', { x: 'deny' }, 2)).version, 2)
          await x.policies.write(a, 'environment', 'prod', { x: 'deny' }, 2)
          await x.verbs.insert(a, {
            name: 'refund',
            description: '',
            status: 'live',
            aliasOf: null,
            createdAt: 2,
            deprecatedAt: null,
          })
          t.equal(await x.verbs.advanceRegistry(a, 0), true)
          await x.grants.markConsumed(a, grantId, 2, 'rcp_x')
          t.equal(await x.grants.renameVerb(a, 'refund', 'repay'), 0, 'consumed in this transaction')
          await x.grants.insert({
            grantId: newId('grant'),
            tenantId: a,
            verb: 'refund',
            target: null,
            principalId: null,
            environment: null,
            reason: null,
            createdAt: 2,
            expiresAt: 1000,
          })
          t.equal(await x.leases.consume(a, lease.leaseId, 2), true)
          await x.leases.insert(newLease)
          t.equal(await x.actions.remove(a, kept.actionId), true)
          await x.actions.insert(staged)
          await x.sandbox.insert({ grantId: sandboxId, verb: 'v', target: 't', createdAt: 1, expiresAt: 5 })
          t.same(
            (await x.actions.list(a, 0, 10)).map((y) => y.actionId),
            [staged.actionId],
            'the transaction sees its own writes',
          )
          throw new Error('abort')
        }),
        /abort/,
      )
      t.match(await s.policies.get(a, 'tenant', ''), { version: 1, policy: { x: 'allow' } })
      t.equal(await s.policies.get(a, 'environment', 'prod'), null)
      t.same(await s.verbs.list(a), [])
      t.equal(await s.verbs.registryVersion(a), 0)
      t.same(
        (await snapshots.read(a, 0))?.grants.map((g) => [g.grantId, g.verb]),
        [[grantId, 'refund']],
        'the grant unconsumed, no other grant',
      )
      t.equal((await s.leases.get(a, lease.leaseId))?.usedAt, null)
      t.equal(await s.leases.get(a, newLease.leaseId), null)
      t.same(
        (await s.actions.list(a, 0, 10)).map((y) => y.actionId),
        [kept.actionId],
      )
      await s.sandbox.insert({ grantId: sandboxId, verb: 'v', target: 't', createdAt: 1, expiresAt: 5 })
      t.equal(await s.sandbox.pruneExpired(5), 1, 'the sandbox grant was not kept (its id is free)')
    })
  })
}
