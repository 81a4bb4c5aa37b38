import t, { type Test } from 'tap'
import { signCheckpoint } from '../../src/core/checkpoint.js'
import { newId } from '../../src/core/ids.js'
import { draft, EMPTY_HEAD } from '../../src/core/receipt.js'
import { createBadgeTokenStore } from '../../src/store/postgres/badge-token-store.js'
import { createCheckpointStore } from '../../src/store/postgres/checkpoint-store.js'
import { createManifestStore } from '../../src/store/postgres/manifest-store.js'
import { createReceiptReader } from '../../src/store/postgres/receipt-reader.js'
import { createSystemOfRecord } from '../../src/store/postgres/system-of-record.js'
import { createFakeStorage } from '../fakes/fake-storage.js'
import { ed25519 } from '../helpers/audit-logs.js'
import { ALL_BACKENDS, openTestDatabase } from '../helpers/backends.js'

const key = ed25519().privateKey

async function stores(t: Test, kind: (typeof ALL_BACKENDS)[number] | 'fake') {
  if (kind === 'fake') {
    const storage = createFakeStorage()
    const { sor, receipts: reader, checkpoints, manifests } = storage
    return { sor, reader, checkpoints, manifests, badges: sor.stores.badgeTokens }
  }
  const tdb = await openTestDatabase(kind)
  t.teardown(() => tdb.close())
  return {
    sor: createSystemOfRecord(tdb.db),
    reader: createReceiptReader(tdb.db.sql),
    checkpoints: createCheckpointStore(tdb.db.sql),
    badges: createBadgeTokenStore(tdb.db.sql),
    manifests: createManifestStore(tdb.db.sql),
  }
}

/** The audit read side, checkpoints, badge tokens and manifests, on every backend and the fakes. */
for (const kind of [...ALL_BACKENDS, 'fake'] as const) {
  t.test(`audit stores contract: ${kind}`, async (t) => {
    const { sor, reader, checkpoints, badges, manifests } = await stores(t, kind)

    async function tenant(): Promise<string> {
      const id = newId('tenant')
      await sor.stores.tenants.create({ id, name: 'T', createdAt: 1, sponsorHash: `h-${id}` })
      return id
    }
    const receipt = (tenantId: string, kind: 'CHECK' | 'REVOKE' | 'EXECUTE' | 'GRANT', extra = {}) =>
      draft({ receiptId: newId('receipt'), tenantId, kind, createdAt: 1000, ...extra })

    t.test('reader: head, rows in a seq window, head seqs of several tenants', async (t) => {
      const a = await tenant()
      const b = await tenant()
      t.same(await reader.head(a), EMPTY_HEAD, 'no log yet')
      const written = await sor.transaction((s) =>
        s.receipts.append([
          receipt(a, 'CHECK', { decision: 'ALLOW' }),
          receipt(a, 'GRANT'),
          receipt(b, 'GRANT'),
        ]),
      )
      const head = await reader.head(a)
      t.same(head, { seq: 2, hash: written[1]?.hash })
      const rows = await reader.rows(a, 0, 10, 10)
      t.same(
        rows.map((r) => [r.seq, r.kind, r.decision, r.receiptId]),
        [
          [1, 'CHECK', 'ALLOW', written[0]?.receiptId],
          [2, 'GRANT', null, written[1]?.receiptId],
        ],
      )
      t.equal(
        rows[0]?.body,
        JSON.stringify(JSON.parse(rows[0]?.body as string)),
        'the body is the stored JCS text',
      )
      t.same(
        (await reader.rows(a, 1, 1, 10)).map((r) => r.seq),
        [],
      )
      t.same(
        (await reader.rows(a, 0, 10, 1)).map((r) => r.seq),
        [1],
      )
      const seqs = await reader.headSeqs([a, b, 'ten_none'])
      t.same(Object.fromEntries(seqs), { [a]: 2, [b]: 1 })
    })

    t.test('reader: decision counts and gated writes within a window, with a cap', async (t) => {
      const a = await tenant()
      const drafts = [
        receipt(a, 'CHECK', { decision: 'ALLOW', createdAt: 500 }), // before the window
        receipt(a, 'CHECK', { decision: 'ALLOW' }),
        receipt(a, 'CHECK', { decision: 'DENY' }),
        receipt(a, 'CHECK', { decision: 'STEP_UP' }),
        receipt(a, 'REVOKE', { decision: 'REVOKE' }),
        receipt(a, 'EXECUTE', { decision: 'ALLOW' }),
        receipt(a, 'GRANT'),
        // An execute's outcome receipt (ALLOW; null in older logs) is the same write as its
        // authorising one: not a second gated write, and not a CHECK decision.
        receipt(a, 'EXECUTE', { decision: 'ALLOW', detail: { phase: 'completed' } }),
        receipt(a, 'EXECUTE', { detail: { phase: 'completed' } }),
      ]
      await sor.transaction((s) => s.receipts.append(drafts))
      t.same(await reader.decisionCounts(a, 900, 5000), {
        byDecision: { ALLOW: 1, DENY: 1, STEP_UP: 1, REVOKE: 1 },
        truncated: false,
      })
      const capped = await reader.decisionCounts(a, 0, 3)
      t.equal(capped.truncated, true)
      t.equal(
        Object.values(capped.byDecision).reduce((x, y) => x + y, 0),
        3,
        'at most cap receipts are counted',
      )
      t.same((await reader.decisionCounts(a, 0, 5)).truncated, false, 'exactly at the cap is not truncated')
      t.equal(await reader.gatedWrites(a, 900), 4, 'CHECK and EXECUTE in the window')
      t.equal(await reader.gatedWrites(a, 0), 5)
    })

    t.test('checkpoints: unanchored heads, idempotent saves, latest and range', async (t) => {
      const a = await tenant()
      const b = await tenant()
      await sor.transaction((s) =>
        s.receipts.append([receipt(a, 'GRANT'), receipt(a, 'GRANT'), receipt(b, 'GRANT')]),
      )
      const heads = (await checkpoints.unanchoredHeads('', 1000)).filter((h) => [a, b].includes(h.tenantId))
      t.same(Object.fromEntries(heads.map((h) => [h.tenantId, h.seq])), { [a]: 2, [b]: 1 })
      const headA = heads.find((h) => h.tenantId === a)!
      const first = signCheckpoint(key, { ...headA, at: 10 })
      await checkpoints.save([first])
      // A second replica checkpointing the same head later does not replace the first.
      await checkpoints.save([signCheckpoint(key, { ...headA, at: 20 })])
      t.same(await checkpoints.at(a, 2), first)
      t.notOk(
        (await checkpoints.unanchoredHeads('', 1000)).some((h) => h.tenantId === a),
        'an anchored head is not listed',
      )
      await sor.transaction((s) => s.receipts.append([receipt(a, 'GRANT')]))
      const next = (await checkpoints.unanchoredHeads('', 1000)).find((h) => h.tenantId === a)
      t.equal(next?.seq, 3, 'a moved head is listed again')
      const third = signCheckpoint(key, { tenantId: a, seq: 3, hash: next!.hash, at: 30 })
      await checkpoints.save([third])
      t.same(await checkpoints.latest(a), third)
      t.same(
        (await checkpoints.range(a, 0, 10, 10)).map((c) => c.seq),
        [2, 3],
      )
      t.same(
        (await checkpoints.range(a, 2, 10, 10)).map((c) => c.seq),
        [3],
      )
      t.equal(await checkpoints.latest('ten_none'), null)
      t.same(
        (await checkpoints.unanchoredHeads(b, 1000)).some((h) => h.tenantId === b),
        false,
        'paged by tenant id',
      )
    })

    t.test('badge tokens: live lookup by hash, revocation scoped to the tenant', async (t) => {
      const a = await tenant()
      const rec = { id: newId('badge'), tenantId: a, tokenHash: `bh-${a}`, label: 'mine', createdAt: 5 }
      await badges.create(rec)
      t.same(await badges.findLive(rec.tokenHash), { ...rec, revokedAt: null })
      t.equal(await badges.findLive('nope'), null)
      t.equal(await badges.revoke('ten_other', rec.tokenHash, 6), false, "another tenant's token")
      t.equal(await badges.revoke(a, rec.tokenHash, 6), true)
      t.equal(await badges.findLive(rec.tokenHash), null)
      t.equal(await badges.revoke(a, rec.tokenHash, 7), false, 'already revoked')
    })

    t.test('manifests: latest per repo, re-imports are no-ops', async (t) => {
      const a = await tenant()
      const e = (repoId: string, commitSha: string, createdAt: number) => ({
        repoId,
        commitSha,
        scannerVersion: '1.2.0',
        createdAt,
      })
      t.equal(await manifests.add(a, [e('r1', 'aaa', 10), e('r1', 'bbb', 20), e('r2', 'ccc', 15)], 100), 3)
      t.equal(await manifests.add(a, [e('r1', 'aaa', 10)], 101), 0, 'the same entry again')
      t.equal(await manifests.add(a, [e('r2', 'ddd', 5)], 102), 1, 'an older scan')
      t.same(await manifests.latest(a), [e('r1', 'bbb', 20), e('r2', 'ccc', 15)])
      t.same(await manifests.latest(await tenant()), [])
    })
  })
}
