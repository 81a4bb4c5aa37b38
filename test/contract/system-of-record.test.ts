import t, { type Test } from 'tap'
import { newId } from '../../src/core/ids.js'
import { canonicalJson } from '../../src/core/jcs.js'
import { chainReceipts, draft, type ReceiptDraft } from '../../src/core/receipt.js'
import { chainHash, GENESIS_HASH } from '../../src/core/receipt-chain.js'
import { migrate } from '../../src/store/migrate.js'
import type { SystemOfRecord } from '../../src/store/ports/index.js'
import type { Database } from '../../src/store/postgres/connect.js'
import { createReceiptReader } from '../../src/store/postgres/receipt-reader.js'
import { createStores, createSystemOfRecord } from '../../src/store/postgres/system-of-record.js'
import { FakeDatabase, key } from '../fakes/fake-database.js'
import { createFakeReceiptReader } from '../fakes/fake-receipt-reader.js'
import { createFakeSystemOfRecord } from '../fakes/fake-system-of-record.js'
import { ALL_BACKENDS, openTestDatabase } from '../helpers/backends.js'

/** What the suite runs against: a real adapter (with its database, for its own checks) or the fakes. */
interface Subject {
  sor: SystemOfRecord
  /** The real adapter's database; null for the fakes, which have no SQL to check. */
  db: Database | null
  /** Stored head seqs of these tenants. */
  heads(tenantIds: string[]): Promise<Map<string, number>>
  /** A receipts row at (tenant, seq) written behind the store's back, as a stray writer would. */
  plantReceipt(tenantId: string, seq: number): Promise<void>
}

async function subject(t: Test, kind: (typeof ALL_BACKENDS)[number] | 'fake'): Promise<Subject> {
  if (kind === 'fake') {
    const db = new FakeDatabase()
    const reader = createFakeReceiptReader({ db, tx: null })
    return {
      sor: createFakeSystemOfRecord(db),
      db: null,
      heads: (ids) => reader.headSeqs(ids),
      async plantReceipt(tenantId, seq) {
        const row = { tenantId, seq, receiptId: newId('receipt'), kind: 'CHECK', decision: null }
        db.receipts.set(null, key(tenantId, seq), {
          ...row,
          createdAt: 0,
          keyId: null,
          body: '{}',
          hash: 'x',
        })
      },
    }
  }
  const tdb = await openTestDatabase(kind)
  t.teardown(() => tdb.close())
  const reader = createReceiptReader(tdb.db.sql)
  return {
    sor: createSystemOfRecord(tdb.db),
    db: tdb.db,
    heads: (ids) => reader.headSeqs(ids),
    async plantReceipt(tenantId, seq) {
      await tdb.db.sql`insert into receipts (tenant_id, seq, receipt_id, kind, created_at, body, hash)
                       values (${tenantId}, ${seq}, ${newId('receipt')}, 'CHECK', 0, '{}', 'x')`
    },
  }
}

/**
 * One suite, run against every system-of-record backend (Cerbos-style TestSuite(store)), and
 * against the fakes the service tests run on (test/fakes), so they cannot drift apart.
 */
for (const kind of [...ALL_BACKENDS, 'fake'] as const) {
  t.test(`system of record contract: ${kind}`, async (t) => {
    const { sor, db: sqlDb, heads: headSeqs, plantReceipt } = await subject(t, kind)
    const s = sor.stores

    async function tenant(): Promise<string> {
      const id = newId('tenant')
      await s.tenants.create({ id, name: 'T', createdAt: 1, sponsorHash: `h-${id}` })
      return id
    }

    if (sqlDb) {
      t.test('migrations are idempotent', async (t) => {
        t.same((await migrate(sqlDb.sql)).applied, [])
      })

      // A generic plan made while the audit log was small stayed a sequential scan of the whole
      // log in every receipt append; every statement is planned for the tables as they are.
      t.test('sessions never keep a generic plan', async (t) => {
        const [row] = await sqlDb.sql<{ plan_cache_mode: string }[]>`show plan_cache_mode`
        t.equal(row?.plan_cache_mode, 'force_custom_plan')
      })
    }

    t.test('tenants: emails are claimed once, versions only go up', async (t) => {
      const a = await tenant()
      t.equal(await s.tenants.claimEmail('x@example.com', a, 5), true)
      t.equal(await s.tenants.claimEmail('x@example.com', a, 6), false)
      t.equal(await s.tenants.tenantOfEmail('x@example.com'), a)
      t.equal(await s.tenants.tenantOfEmail('nobody@example.com'), null)
      t.equal((await s.tenants.get(a))?.version, 0)
      t.equal(await s.tenants.bumpVersion(a), 1)
      t.equal(await s.tenants.bumpVersion(a), 2)
      t.equal((await s.tenants.findBySponsorHash(`h-${a}`))?.tenant.id, a)
      t.equal(await s.tenants.replaceSponsorHash(a, 'not-it', 'h2'), false, 'only from the current hash')
      t.equal((await s.tenants.findBySponsorHash(`h-${a}`))?.tenant.id, a)
      t.equal(await s.tenants.replaceSponsorHash(a, `h-${a}`, 'h2'), true)
      t.equal(
        await s.tenants.replaceSponsorHash(a, `h-${a}`, 'h3'),
        false,
        'a second rotation from the old hash',
      )
      t.equal(await s.tenants.findBySponsorHash(`h-${a}`), null)
      t.equal((await s.tenants.findBySponsorHash('h2'))?.tenant.id, a)
    })

    t.test('principals: live names unique case-insensitively, tombstones free them', async (t) => {
      const a = await tenant()
      const p1 = { id: newId('principal'), tenantId: a, name: 'Bot', disabled: false, createdAt: 10 }
      t.equal(await s.principals.create(p1), true)
      t.equal(await s.principals.create({ ...p1, id: newId('principal'), name: 'bOT' }), false)
      t.equal((await s.principals.findLiveByName(a, 'BOT'))?.id, p1.id)
      const p2 = { ...p1, id: newId('principal'), name: 'Other' }
      await s.principals.create(p2)
      t.equal(await s.principals.rename(a, p2.id, 'bot'), false)
      t.equal(await s.principals.rename(a, p1.id, 'bot'), true, 'own name, other case')
      await s.principals.tombstone(a, p1.id, 20)
      t.equal(await s.principals.findLiveByName(a, 'bot'), null)
      t.equal(await s.principals.rename(a, p2.id, 'BOT'), true)
      t.equal((await s.principals.get(a, p1.id))?.deletedAt, 20)
      t.equal(await s.principals.get('ten_other', p1.id), null, 'scoped by tenant')
      t.same(
        (await s.principals.list(a, false)).map((p) => p.id),
        [p2.id],
      )
      t.same(
        (await s.principals.list(a, true)).map((p) => p.id),
        [p1.id, p2.id],
        'creation order',
      )
    })

    t.test('keys: resolve joins the principal, revoke skips revoked keys', async (t) => {
      const a = await tenant()
      const p = { id: newId('principal'), tenantId: a, name: 'k', disabled: false, createdAt: 1 }
      await s.principals.create(p)
      const k1 = {
        id: newId('key'),
        tenantId: a,
        principalId: p.id,
        secretHash: `sh-${newId('key')}`,
        scope: 'admin' as const,
        email: 'e@x.io',
        createdAt: 2,
      }
      const k2 = { ...k1, id: newId('key'), secretHash: `sh-${newId('key')}`, scope: 'agent' as const }
      await s.keys.create(k1)
      await s.keys.create(k2)
      const r = await s.keys.resolve(k1.secretHash)
      t.match(r, {
        secretHash: k1.secretHash,
        key: { id: k1.id, scope: 'admin', revokedAt: null },
        principal: { id: p.id, name: 'k', disabled: false },
      })
      t.equal(await s.keys.resolve('nope'), null)
      t.equal(await s.principals.keyCount(p.id), 2)
      t.same(await s.keys.revoke(a, [k1.id], 9, 'why'), [k1.id])
      t.same(await s.keys.revoke(a, [k1.id, k2.id], 10, null), [k2.id])
      t.same(await s.keys.revoke('ten_other', [k1.id], 10, null), [])
      t.equal((await s.keys.resolve(k1.secretHash))?.key.revokedAt, 9)
      t.same(await s.keys.liveKeysOfPrincipal(a, p.id), [])
    })

    t.test('roster: a lifted revocation is kept, lifted, and can be made again', async (t) => {
      const a = await tenant()
      const key = { kind: 'key' as const, id: 'key_1' }
      t.equal(await s.roster.add(a, key, 'first', 10), true)
      t.equal(await s.roster.add(a, key, 'second', 11), false, 'already on: the first reason stands')
      t.same(await s.roster.list(a), [{ target: key, reason: 'first', revokedAt: 10 }])
      t.equal(await s.roster.remove(a, key, 20), true)
      t.equal(await s.roster.remove(a, key, 21), false, 'lifted already')
      t.same(await s.roster.list(a), [], 'a lifted entry is not on the roster')
      if (sqlDb) {
        const [row] = await sqlDb.sql<{ revoked_at: number; lifted_at: number }[]>`
          select revoked_at, lifted_at from revocations where tenant_id = ${a}`
        t.same([Number(row?.revoked_at), Number(row?.lifted_at)], [10, 20], 'but kept, with both times')
      }
      t.equal(await s.roster.add(a, key, 'again', 30), true, 'revoked again')
      t.same(await s.roster.list(a), [{ target: key, reason: 'again', revokedAt: 30 }])
      t.equal(await s.roster.add(a, { kind: 'all' }, null, 40), true)
      t.equal(await s.roster.remove(a, { kind: 'all' }, 41), true)
    })

    t.test('invites: one per tenant, rotation replaces', async (t) => {
      const a = await tenant()
      await s.invites.rotate(a, `ih1-${a}`, 1, 100, 'key_1')
      t.same(await s.invites.findByHash(`ih1-${a}`), {
        tenantId: a,
        createdAt: 1,
        expiresAt: 100,
        issuerKeyId: 'key_1',
      })
      await s.invites.rotate(a, `ih2-${a}`, 2, 200, 'key_2')
      t.equal(await s.invites.findByHash(`ih1-${a}`), null)
      t.match(
        await s.invites.findByHash(`ih2-${a}`),
        { expiresAt: 200, issuerKeyId: 'key_2' },
        'the issuer replaced too',
      )
    })

    t.test('totp: replayed or older steps are refused; backup codes are single-use', async (t) => {
      const a = await tenant()
      const codes = [
        { index: 0, salt: 's', hash: 'h' },
        { index: 1, salt: 's', hash: 'h' },
      ]
      t.equal(await s.totp.enrol(a, 'sealed', 1, codes, null), true)
      t.equal(await s.totp.enrol(a, 'other', 1, codes, null), false, 'a first enrolment is made once')
      t.same(await s.totp.secret(a), { secretEnc: 'sealed', lastUsedStep: null })
      t.equal(await s.totp.acceptStep(a, 100, 'sealed'), true)
      t.equal(await s.totp.acceptStep(a, 100, 'sealed'), false, 'the same step twice')
      t.equal(await s.totp.acceptStep(a, 99, 'sealed'), false, 'an older step')
      t.equal(
        await s.totp.acceptStep(a, 102, 'other'),
        false,
        'checked against an enrolment that is not current',
      )
      t.equal(await s.totp.acceptStep(a, 101, 'sealed'), true)
      t.equal((await s.totp.unusedBackupCodes(a)).length, 2)
      t.equal(await s.totp.useBackupCode(a, 0, 5, 'other'), false, 'a backup code of another enrolment')
      t.equal(await s.totp.useBackupCode(a, 1, 5, 'sealed'), true)
      t.equal(await s.totp.useBackupCode(a, 1, 6, 'sealed'), false)
      t.same(
        (await s.totp.unusedBackupCodes(a)).map((c) => c.index),
        [0],
      )
      // A bucket of 3 that drains one code every 10 seconds (the verifier's is 100 a month).
      const count = (at: number) => s.totp.countCodeTried(a, at, 3, 0.1)
      t.equal(await count(1000), 1)
      t.equal(await count(1000), 2, 'counted up')
      t.equal(await s.totp.uncountCodeTried(a, 3), true, 'a right code takes back its own')
      t.equal(await count(1000), 2, 'only its own')
      t.equal(await count(1010), 2, 'ten seconds drained one')
      t.equal(await count(1010), 3)
      t.equal(await count(1010), 4, 'overflowing: the lock')
      t.equal(await s.totp.uncountCodeTried(a, 3), false, 'locked: a right code takes nothing back')
      t.equal(await count(100_000), 5, 'locked, it no longer drains')
      t.equal(await s.totp.countCodeTried('ten_none', 1000, 3, 0.1), null, 'no authenticator, no count')
      t.equal(await s.totp.enrol(a, 'sealed2', 2, [{ index: 0, salt: 's', hash: 'h2' }], 'sealed'), true)
      t.same(await s.totp.secret(a), { secretEnc: 'sealed2', lastUsedStep: null }, 're-enrolment resets')
      t.equal(await count(100_001), 1, 'the count too')
      t.equal(
        await s.totp.enrol(a, 'sealed3', 3, [{ index: 5, salt: 's', hash: 'h3' }], 'sealed'),
        false,
        'a re-enrolment of what another already replaced changes nothing',
      )
      t.same(await s.totp.secret(a), { secretEnc: 'sealed2', lastUsedStep: null })
      t.same(
        (await s.totp.unusedBackupCodes(a)).map((c) => c.index),
        [0],
        "the other's backup codes stand",
      )
    })

    t.test('receipts: gap-free seq per tenant, chained, idempotent by receiptId', async (t) => {
      const a = await tenant()
      const b = await tenant()
      const d = (tenantId: string) =>
        draft({
          receiptId: newId('receipt'),
          tenantId,
          kind: 'CHECK',
          decision: 'ALLOW',
          createdAt: 50,
          detail: { n: 1 },
        })
      const first = await sor.transaction((x) => x.receipts.append([d(a), d(b), d(a)]))
      t.same(
        first.map((r) => [r.tenantId === a ? 'a' : 'b', r.seq]),
        [
          ['a', 1],
          ['b', 1],
          ['a', 2],
        ],
      )
      t.equal(first[0]?.prevHash, GENESIS_HASH)
      t.equal(first[2]?.prevHash, first[0]?.hash)
      const { seq: _s, prevHash: _p, hash: _h, ...storedDraft } = first[0]!
      const again = await sor.transaction((x) => x.receipts.append([storedDraft, d(a)]))
      t.equal(again[0]?.seq, 1, 'an already-stored receiptId returns the stored receipt')
      t.equal(again[1]?.seq, 3)
      const list = await s.receipts.list(a, 0, 10)
      t.same(
        list.map((r) => r.seq),
        [1, 2, 3],
      )
      for (let i = 0; i < list.length; i++) {
        const { hash, ...body } = list[i]!
        t.equal(chainHash(i === 0 ? GENESIS_HASH : list[i - 1]!.hash, body), hash, `seq ${i + 1} verifies`)
      }
      t.same(await s.receipts.get(a, list[1]!.receiptId), list[1])
      t.equal(await s.receipts.get(b, list[1]!.receiptId), null, 'scoped by tenant')
      t.same(
        (await s.receipts.list(a, 1, 1)).map((r) => r.seq),
        [2],
      )
    })

    t.test('receipts: a body is stored as the exact text that was hashed, whatever it holds', async (t) => {
      const a = await tenant()
      // Bodies go into the insert as JSON values, verbatim, except those Postgres's JSON parser
      // refuses (lone surrogates, NUL: any \u escape), which go as strings.
      const details: Record<string, unknown>[] = [
        { lone: '\ud800', low: '\udc00 tail' },
        { nul: 'a\u0000b', controls: '\u0001\u001f\n\t' },
        { literal: '\\u0041 is not an escape', slashes: '\\\\"' },
        { emoji: '\ud83d\ude00', accents: 'éü\u2028\u2029', big: 1e21, small: 1e-7, neg: -0.5 },
        { tricky: '"},{"tenant_id":"x","seq":1', nested: { z: [1, { b: null, a: true }], a: '' } },
        {},
      ]
      // Bodies with and without a \u escape on both paths: the first two hold one, the rest not.
      const order = [0, 2, 4, 1, 3, 5]
      const drafts = order.map((i) =>
        draft({
          receiptId: newId('receipt'),
          tenantId: a,
          kind: 'CHECK',
          createdAt: 7,
          detail: details[i]!,
          ...(i === 0 ? { target: '\ud800' } : {}),
        }),
      )
      const viaTransaction = await sor.transaction((x) => x.receipts.append(drafts.slice(0, 3)))
      const head = { seq: 3, hash: viaTransaction[2]!.hash }
      const chained = chainReceipts(head, drafts.slice(3))
      t.same(
        await s.receipts.appendChained([
          { tenantId: a, from: head, to: chained.head, receipts: chained.receipts, bodies: chained.bodies },
        ]),
        { stale: [] },
      )
      const list = await s.receipts.list(a, 0, 10)
      t.equal(list.length, details.length)
      for (let i = 0; i < list.length; i++) {
        const { hash, ...body } = list[i]!
        t.equal(chainHash(i === 0 ? GENESIS_HASH : list[i - 1]!.hash, body), hash, `seq ${i + 1} verifies`)
        t.same(body.detail, details[order[i]!], `seq ${i + 1}: detail served as given`)
      }
      if (sqlDb) {
        const rows = await sqlDb.sql<{ body: string }[]>`
          select body from receipts where tenant_id = ${a} order by seq`
        const hashed = [
          ...viaTransaction.map(({ hash: _h, ...body }) => canonicalJson(body)),
          ...chained.bodies,
        ]
        t.same(
          rows.map((r) => r.body),
          hashed,
          'the stored text is byte for byte the hashed text, on both paths',
        )
      }
    })

    t.test('receipts: a draft missing a nullable member is stored with it null', async (t) => {
      const a = await tenant()
      const {
        keyId: _k,
        decision: _d,
        ...partial
      } = draft({
        receiptId: newId('receipt'),
        tenantId: a,
        kind: 'CHECK',
        createdAt: 7,
      })
      const [r] = await sor.transaction((x) => x.receipts.append([partial as ReceiptDraft]))
      const chained = chainReceipts({ seq: 1, hash: r!.hash }, [
        { ...partial, receiptId: newId('receipt') } as ReceiptDraft,
      ])
      t.same(
        await s.receipts.appendChained([
          { tenantId: a, from: { seq: 1, hash: r!.hash }, to: chained.head, ...chained },
        ]),
        { stale: [] },
      )
      const list = await s.receipts.list(a, 0, 10)
      t.equal(list.length, 2)
      for (const stored of list) t.notOk('keyId' in stored, 'left out, as it was hashed')
      if (sqlDb) {
        const rows = await sqlDb.sql<{ key_id: string | null; decision: string | null }[]>`
          select key_id, decision from receipts where tenant_id = ${a}`
        t.same(rows, [
          { key_id: null, decision: null },
          { key_id: null, decision: null },
        ])
      }
    })

    if (sqlDb)
      t.test(
        'receipts: a queued field of the wrong type is refused, never spliced into the statement',
        async (t) => {
          // Drained payloads are parsed from Redis, not validated: a string where a number belongs
          // must fail the insert, not rewrite the row's columns.
          const a = await tenant()
          const victim = await tenant()
          const forged = draft({
            receiptId: newId('receipt'),
            tenantId: a,
            kind: 'CHECK',
            createdAt: `0,"tenant_id":"${victim}","seq":1` as unknown as number,
          })
          const chained = chainReceipts({ seq: 0, hash: GENESIS_HASH }, [forged])
          await t.rejects(
            s.receipts.appendChained([
              { tenantId: a, from: { seq: 0, hash: GENESIS_HASH }, to: chained.head, ...chained },
            ]),
          )
          await t.rejects(sor.transaction((x) => x.receipts.append([forged])))
          t.same(await s.receipts.list(victim, 0, 10), [], 'nothing written for the other tenant')
          t.same(await s.receipts.list(a, 0, 10), [], 'nor for its own')
        },
      )

    t.test('receipts: concurrent appends and rollbacks never fork or gap the chain', async (t) => {
      const a = await tenant()
      const writers = Array.from({ length: 12 }, (_, w) =>
        sor
          .transaction(async (x) => {
            await x.receipts.append([
              draft({ receiptId: newId('receipt'), tenantId: a, kind: 'CHECK', createdAt: w, detail: { w } }),
            ])
            if (w % 4 === 0) throw new Error('rollback on purpose')
          })
          .catch(() => 'rolled back'),
      )
      await Promise.all(writers)
      const list = await s.receipts.list(a, 0, 100)
      t.same(
        list.map((r) => r.seq),
        Array.from({ length: 9 }, (_, i) => i + 1),
        '9 committed, seq 1..9',
      )
      for (let i = 1; i < list.length; i++) t.equal(list[i]!.prevHash, list[i - 1]!.hash)
    })

    t.test('receipts: a pipelined append is one transaction: kept whole or not at all', async (t) => {
      const a = await tenant()
      const b = await tenant()
      const d = (tenantId: string, n: number) =>
        draft({ receiptId: newId('receipt'), tenantId, kind: 'CHECK', createdAt: n, detail: { n } })
      const appendAlone = (drafts: ReceiptDraft[]) => sor.transaction((x) => x.receipts.append(drafts))
      // Concurrent appends of their own, on both tenants: gap-free and linked.
      const written = await Promise.all(
        Array.from({ length: 16 }, (_, n) => appendAlone([d(n % 2 ? a : b, n)])),
      )
      t.equal(written.flat().length, 16)
      for (const ten of [a, b]) {
        const list = await s.receipts.list(ten, 0, 100)
        t.same(
          list.map((r) => r.seq),
          [1, 2, 3, 4, 5, 6, 7, 8],
        )
        for (let i = 1; i < list.length; i++) t.equal(list[i]!.prevHash, list[i - 1]!.hash)
      }
      const again = await appendAlone([written[0]![0]!])
      t.same(again, written[0], 'idempotent: the stored receipt comes back')

      // A row planted where a's next receipt goes makes the batch's insert fail: nothing of the
      // batch is kept (b's receipt included), and the connection is not left in a transaction.
      await plantReceipt(a, 9)
      const lost = [d(b, 100), d(a, 101)]
      await t.rejects(appendAlone(lost), { code: '23505' })
      t.equal(await s.receipts.get(b, lost[0]!.receiptId), null, 'rolled back whole')
      t.equal((await s.receipts.list(b, 8, 10)).length, 0)
      t.equal((await headSeqs([a])).get(a), 8, 'the head did not move')
      for (let i = 0; i < 12; i++) {
        // More than the pool's connections: a connection left inside the failed transaction
        // would refuse these.
        const [r] = await appendAlone([d(b, 200 + i)])
        t.equal(r?.seq, 9 + i)
      }
      t.equal((await s.tenants.get(b))?.id, b)
    })

    t.test(
      'receipts: chained in memory, stored in one statement only where the head still stands',
      async (t) => {
        const a = await tenant()
        const b = await tenant()
        const d = (tenantId: string, n: number) =>
          draft({ receiptId: newId('receipt'), tenantId, kind: 'CHECK', createdAt: n, detail: { n } })
        const [a1] = await sor.transaction((x) => x.receipts.append([d(a, 1), d(b, 1)]))
        const heads = async () => {
          const seqs = await headSeqs([a, b])
          return { a: seqs.get(a), b: seqs.get(b) }
        }
        const headA = { seq: 1, hash: a1!.hash }
        const chainedA = chainReceipts(headA, [d(a, 2), d(a, 3)])
        const bStored = (await s.receipts.list(b, 0, 10))[0]!
        // b's head is given wrong (seq right, hash not): b is stale and nothing of b is written.
        const chainedB = chainReceipts({ seq: 1, hash: 'f'.repeat(64) }, [d(b, 2)])
        const out = await s.receipts.appendChained([
          {
            tenantId: a,
            from: headA,
            to: chainedA.head,
            receipts: chainedA.receipts,
            bodies: chainedA.bodies,
          },
          {
            tenantId: b,
            from: { seq: 1, hash: 'f'.repeat(64) },
            to: chainedB.head,
            receipts: chainedB.receipts,
            bodies: chainedB.bodies,
          },
        ])
        t.same(out, { stale: [b] })
        t.same(await heads(), { a: 3, b: 1 }, "a's head moved to the batch's end, b's did not")
        const listA = await s.receipts.list(a, 0, 10)
        t.same(listA.slice(1), chainedA.receipts, 'stored exactly as chained in memory')
        t.equal(listA[1]?.prevHash, a1!.hash)
        t.same(await s.receipts.list(b, 0, 10), [bStored])

        // A head that has moved since (as another writer would have moved it): stale, nothing kept.
        const late = chainReceipts(headA, [d(a, 4)])
        t.same(
          await s.receipts.appendChained([
            { tenantId: a, from: headA, to: late.head, receipts: late.receipts, bodies: late.bodies },
          ]),
          { stale: [a] },
        )
        t.equal(await s.receipts.get(a, late.receipts[0]!.receiptId), null)

        // A receiptId already stored fails the statement whole: the other tenant's rows go too.
        const fromB = { seq: 1, hash: bStored.hash }
        const again = chainReceipts(chainedA.head, [{ ...d(a, 5), receiptId: listA[2]!.receiptId }])
        const okB = chainReceipts(fromB, [d(b, 5)])
        await t.rejects(
          s.receipts.appendChained([
            { tenantId: b, from: fromB, to: okB.head, receipts: okB.receipts, bodies: okB.bodies },
            {
              tenantId: a,
              from: chainedA.head,
              to: again.head,
              receipts: again.receipts,
              bodies: again.bodies,
            },
          ]),
          { code: '23505' },
        )
        t.same(await heads(), { a: 3, b: 1 }, 'no head moved')
        t.equal(await s.receipts.get(b, okB.receipts[0]!.receiptId), null)

        // Concurrent statements chained from the same head: exactly one wins, the chain does not fork.
        const rivals = Array.from({ length: 6 }, (_, i) => chainReceipts(chainedA.head, [d(a, 10 + i)]))
        const results = await Promise.all(
          rivals.map((c) =>
            s.receipts.appendChained([
              { tenantId: a, from: chainedA.head, to: c.head, receipts: c.receipts, bodies: c.bodies },
            ]),
          ),
        )
        t.equal(results.filter((r) => r.stale.length === 0).length, 1, 'one statement of six won')
        const final = await s.receipts.list(a, 0, 10)
        t.same(
          final.map((r) => r.seq),
          [1, 2, 3, 4],
        )
        for (let i = 1; i < final.length; i++) t.equal(final[i]!.prevHash, final[i - 1]!.hash)
        t.same(await s.receipts.appendChained([]), { stale: [] })
      },
    )

    // Only a database other connections write can make the statement wait on a head row held by
    // another transaction; PGlite has one connection and runs statements in turn.
    if (sqlDb?.shared) {
      const tdb = { db: sqlDb }
      t.test(
        'receipts: a statement waiting on a head held by another transaction sees the head it commits',
        async (t) => {
          const a = await tenant()
          const d = (n: number) =>
            draft({ receiptId: newId('receipt'), tenantId: a, kind: 'CHECK', createdAt: n, detail: { n } })
          const batch = (from: { seq: number; hash: string }) => {
            const c = chainReceipts(from, [d(0)])
            return [{ tenantId: a, from, to: c.head, receipts: c.receipts, bodies: c.bodies }]
          }
          /** Resolves once a statement is queued behind the head row's lock. */
          async function waitingOnLock(): Promise<void> {
            for (let i = 0; i < 500; i++) {
              const [w] = await tdb.db.sql<{ n: number }[]>`
                select count(*)::int as n from pg_stat_activity
                where wait_event_type = 'Lock' and query like '%json_to_recordset%'
                  and datname = current_database() and pid <> pg_backend_pid()`
              if ((w?.n ?? 0) > 0) return
              await new Promise((r) => setTimeout(r, 10))
            }
            throw new Error('the statement never waited on the head row')
          }
          const [first] = await sor.transaction((x) => x.receipts.append([d(1)]))

          // The pipelined case: chained from the head the holder is about to commit.
          let pipelined: Promise<{ stale: string[] }> | undefined
          await sor.transaction(async (x) => {
            const [r] = await x.receipts.append([d(2)])
            pipelined = s.receipts.appendChained(batch({ seq: 2, hash: r!.hash }))
            await waitingOnLock()
          })
          t.same(await pipelined, { stale: [] }, 'ready once the holder committed the head it chained from')

          // Chained from the head before the holder's append: stale once the holder commits.
          let behind: Promise<{ stale: string[] }> | undefined
          await sor.transaction(async (x) => {
            await x.receipts.append([d(4)])
            behind = s.receipts.appendChained(
              batch({ seq: 3, hash: (await s.receipts.list(a, 2, 1))[0]!.hash }),
            )
            await waitingOnLock()
          })
          t.same(await behind, { stale: [a] }, 'the committed head is read after the wait')

          // Chained from a head the holder then rolls back: stale, nothing written.
          let rolledBack: Promise<{ stale: string[] }> | undefined
          let phantom = ''
          await t.rejects(
            sor.transaction(async (x) => {
              const [r] = await x.receipts.append([d(5)])
              phantom = r!.hash
              rolledBack = s.receipts.appendChained(batch({ seq: 5, hash: phantom }))
              await waitingOnLock()
              throw new Error('roll back')
            }),
            /roll back/,
          )
          t.same(await rolledBack, { stale: [a] })
          const chain = await s.receipts.list(a, 0, 10)
          t.same(
            chain.map((r) => r.seq),
            [1, 2, 3, 4],
          )
          t.notOk(
            chain.some((r) => r.prevHash === phantom),
            'nothing chained from the rolled-back head',
          )
          for (let i = 1; i < chain.length; i++) t.equal(chain[i]!.prevHash, chain[i - 1]!.hash)
          t.equal(chain[0]!.receiptId, first!.receiptId)
        },
      )
    }

    t.test('receipts: the store refuses a chained batch that does not run from `from` to `to`', async (t) => {
      const a = await tenant()
      const d = (n: number) =>
        draft({ receiptId: newId('receipt'), tenantId: a, kind: 'CHECK', createdAt: n, detail: { n } })
      const head = (await sor.transaction((x) => x.receipts.append([d(1)])))[0]!
      const from = { seq: 1, hash: head.hash }
      const c = chainReceipts(from, [d(2), d(3)])
      const ok = { tenantId: a, from, to: c.head, receipts: c.receipts, bodies: c.bodies }
      const bad = {
        'a receipt missing (a gap)': { ...ok, receipts: [c.receipts[1]!], bodies: [c.bodies[1]!] },
        '`to` past the receipts': { ...ok, to: { seq: 5, hash: c.head.hash } },
        'chained from another head': { ...ok, from: { seq: 1, hash: 'f'.repeat(64) } },
        'bodies missing': { ...ok, bodies: [] },
        'no receipts': { ...ok, receipts: [], bodies: [], to: from },
      }
      for (const [name, b] of Object.entries(bad))
        await t.rejects(s.receipts.appendChained([b]), TypeError, name)
      await t.rejects(s.receipts.appendChained([ok, ok]), TypeError, 'one tenant twice')
      t.same(
        (await s.receipts.list(a, 0, 10)).map((r) => r.seq),
        [1],
        'nothing written',
      )
      t.same(await s.receipts.appendChained([ok]), { stale: [] }, 'the well-formed batch is stored')
    })

    t.test(
      'systems: per-tenant ids, whole replacement with versions, tombstones keep ids taken',
      async (t) => {
        const a = await tenant()
        const b = await tenant()
        const def = {
          systemId: 'sys_x',
          kind: 'http' as const,
          upstream: 'https://x.example',
          credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'X_TOKEN' },
          reads: 'pass' as const,
          routes: [{ method: 'POST' as const, path: '/v1/a/{id}', verb: 'verify', target: '{id}' }],
          tools: [],
        }
        const created = await s.systems.insert(a, 'sys_x', def, 10)
        t.match(created, { ...def, tenantId: a, version: 1, createdAt: 10, updatedAt: 10 })
        t.equal(await s.systems.insert(a, 'sys_x', def, 11), null, 'taken in the tenant')
        t.match(
          await s.systems.insert(b, 'sys_x', def, 12),
          { tenantId: b, version: 1 },
          'ids are per tenant',
        )
        const next = { ...def, routes: [{ method: 'PUT' as const, path: '/v1/b', verb: 'refund' }] }
        t.match(await s.systems.replace(a, 'sys_x', next, 20), {
          version: 2,
          routes: next.routes,
          createdAt: 10,
          updatedAt: 20,
        })
        t.same((await s.systems.get(a, 'sys_x'))?.routes, next.routes)
        t.same((await s.systems.get(b, 'sys_x'))?.routes, def.routes, "another tenant's is untouched")
        t.equal(await s.systems.count(a), 1)
        t.same(
          (await s.systems.list(a)).map((x) => x.systemId),
          ['sys_x'],
        )
        t.equal(await s.systems.remove(a, 'sys_x', 30), true)
        t.equal(await s.systems.remove(a, 'sys_x', 31), false)
        t.match(await s.systems.get(a, 'sys_x'), { deletedAt: 30, version: 2 })
        t.same(await s.systems.list(a), [])
        t.equal(await s.systems.count(a), 0)
        t.equal(await s.systems.replace(a, 'sys_x', def, 40), null, 'a tombstone is not replaced')
        t.equal(await s.systems.insert(a, 'sys_x', def, 41), null, 'nor reused')
        t.equal(await s.systems.get(a, 'sys_never'), null)
        if (sqlDb) {
          const stored = await sqlDb.sql<{ definition: Record<string, unknown> }[]>`
          select definition from systems where tenant_id = ${b} and system_id = 'sys_x'`
          t.notOk('systemId' in (stored[0]?.definition ?? {}), 'the id is the row key, not in the definition')
        }
      },
    )

    t.test('portal sessions: found by hash, touched forward only, purged when idle or expired', async (t) => {
      const a = await tenant()
      const base = { tenantId: a, keyId: 'key_1', principalId: 'prn_1', createdAt: 100, lastSeenAt: 100 }
      await s.portalSessions.create({ ...base, sessionHash: `live-${a}`, expiresAt: 10_000 })
      await s.portalSessions.create({ ...base, sessionHash: `old-${a}`, expiresAt: 500 })
      await s.portalSessions.create({ ...base, sessionHash: `idle-${a}`, expiresAt: 10_000 })
      t.same(await s.portalSessions.find(`live-${a}`), {
        ...base,
        sessionHash: `live-${a}`,
        expiresAt: 10_000,
      })
      t.equal(await s.portalSessions.find('no-such-hash'), null)
      await s.portalSessions.touch(`live-${a}`, 900)
      await s.portalSessions.touch(`live-${a}`, 300)
      t.equal((await s.portalSessions.find(`live-${a}`))?.lastSeenAt, 900, 'never moved back')
      t.ok((await s.portalSessions.purge(600, 200)) >= 2)
      t.equal(await s.portalSessions.find(`old-${a}`), null, 'past its absolute expiry')
      t.equal(await s.portalSessions.find(`idle-${a}`), null, 'idle since before the cut')
      t.ok(await s.portalSessions.find(`live-${a}`))
      t.equal(await s.portalSessions.remove(`live-${a}`), true)
      t.equal(await s.portalSessions.remove(`live-${a}`), false)
      const b = await tenant()
      for (const [tenantId, hash] of [
        [a, `one-${a}`],
        [a, `two-${a}`],
        [b, `other-${b}`],
      ] as const)
        await s.portalSessions.create({ ...base, tenantId, sessionHash: hash, expiresAt: 10_000 })
      t.equal(await s.portalSessions.removeTenant(a), 2, 'every session of the tenant')
      t.equal(await s.portalSessions.find(`one-${a}`), null)
      t.ok(await s.portalSessions.find(`other-${b}`), "another tenant's is kept")
    })

    // Only where transactions run side by side (PGlite runs them in turn, so none can wait on another).
    if (kind === 'fake' || sqlDb?.shared)
      t.test(
        "two transactions waiting for each other's rows: one fails as a deadlock, the other commits",
        async (t) => {
          const [a, b] = [await tenant(), await tenant()]
          let holding = 0
          let bothHoldOne!: () => void
          const crossed = new Promise<void>((r) => {
            bothHoldOne = r
          })
          const cross = (first: string, second: string) =>
            sor.transaction(async (x) => {
              await x.tenants.bumpVersion(first)
              if (++holding === 2) bothHoldOne()
              await crossed
              await x.tenants.bumpVersion(second)
            })
          const results = await Promise.allSettled([cross(a, b), cross(b, a)])
          const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected')
          t.equal(failed.length, 1, 'one of them is failed')
          t.equal((failed[0]?.reason as { code?: string } | undefined)?.code, '40P01', 'as deadlock_detected')
          const versions = [(await s.tenants.get(a))?.version, (await s.tenants.get(b))?.version]
          t.same(versions, [1, 1], 'the other bumped both; the failed one is rolled back whole')
        },
      )

    t.test('a transaction sees its own writes and rolls back as a unit', async (t) => {
      const a = await tenant()
      let seenInside: number | undefined
      await t.rejects(
        sor.transaction(async (x) => {
          await x.tenants.bumpVersion(a)
          seenInside = (await x.tenants.get(a))?.version
          throw new Error('abort')
        }),
        /abort/,
        "the callback's error is the transaction's",
      )
      t.equal(seenInside, 1, 'the transaction saw its own write')
      t.equal((await s.tenants.get(a))?.version, 0, 'rolled back: nobody else ever sees it')
      if (sqlDb) {
        // Stores bound to a plain handle (no transaction) read and write like the others.
        const bound = createStores(sqlDb.sql)
        await bound.tenants.bumpVersion(a)
        t.equal((await s.tenants.get(a))?.version, 1, 'stores bound to any handle write through it')
      }
    })
  })
}
