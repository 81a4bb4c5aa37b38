import type { KeyObject } from 'node:crypto'
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import type { Checkpointer } from '../audit/checkpointer.js'
import { exportLogStream } from '../audit/log-export.js'
import { verifyStoredLog } from '../audit/log-verifier.js'
import { RECEIPT_STREAM_HEADERS, type ReceiptStream, startReceiptStream } from '../audit/receipt-stream.js'
import type { ReceiptWakeups } from '../audit/receipt-wakeups.js'
import type { StreamSlots } from '../audit/stream-slots.js'
import { type Clock, nowSeconds } from '../core/clock.js'
import { ERRORS, fail } from '../core/errors.js'
import type { Receipt } from '../core/receipt.js'
import { type Authenticator, bearerOf } from '../identity/authenticator.js'
import { clientLeaves } from '../node-http/client-leaves.js'
import { portalSessionOf } from '../portal/portal-http.js'
import type { PortalSessions } from '../portal/portal-sessions.js'
import type { CheckpointStore } from '../store/ports/checkpoints.js'
import type { SystemOfRecord } from '../store/ports/index.js'
import type { ReceiptReader } from '../store/ports/receipt-reader.js'
import { keyCaller, requireKey } from './http/auth.js'

/** Contract §5. Loose, so a field added later still reaches clients (and their hash checks) intact. */
export const receiptSchema = z.looseObject({
  receiptId: z.string(),
  tenantId: z.string(),
  seq: z.number().int(),
  kind: z.string(),
  decision: z.string().nullable(),
  verb: z.string().nullable(),
  requestedVerb: z.string().nullable(),
  target: z.string().nullable(),
  environment: z.string().nullable(),
  principalId: z.string().nullable(),
  principalName: z.string().nullable(),
  keyId: z.string().nullable(),
  reason: z.string().nullable(),
  policyVersion: z.number().int().nullable(),
  detail: z.record(z.string(), z.unknown()),
  createdAt: z.number().int(),
  prevHash: z.string(),
  hash: z.string(),
})

type WireReceipt = z.infer<typeof receiptSchema>
const wire = (r: Receipt): WireReceipt => r as Receipt & WireReceipt

const seqParam = z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER)

export const STATS_WINDOW_SECONDS = 86_400
export const STATS_CAP = 5000
const DECISIONS = ['ALLOW', 'DENY', 'REVOKE', 'STEP_UP'] as const

export interface ReceiptsDeps {
  auth: Authenticator
  sor: SystemOfRecord
  reader: ReceiptReader
  checkpoints: CheckpointStore
  checkpointer: Checkpointer
  wakeups: ReceiptWakeups
  publicKey: KeyObject
  clock: Clock
  streamKeepaliveMs: number
  /** Open receipt streams, API and portal together (stream-slots.ts). */
  streamSlots: StreamSlots
  /** Stats also accept a portal session (interface.md: "K or portal session"); null when the portal is off. */
  portalSessions: PortalSessions | null
}

export function receiptsRoutes(deps: ReceiptsDeps): FastifyPluginAsyncZod {
  return async (app) => {
    const admin = requireKey(deps.auth, { scope: 'admin' })
    const streams = new Set<ReceiptStream>()
    // Open streams would keep server.close() waiting for ever: end them first.
    app.addHook('preClose', async () => {
      const closing = [...streams].map((s) => {
        s.close()
        return s.done
      })
      await Promise.all(closing)
    })

    app.get(
      '/v1/receipts',
      {
        schema: {
          summary: 'List receipts in seq order',
          description:
            'Receipts with seq > `after`, at most `limit`. `nextAfter` is the seq to pass as `after` for the next page (unchanged when the page is empty).',
          querystring: z.object({
            after: seqParam.default(0),
            limit: z.coerce.number().int().min(1).max(1000).default(100),
          }),
          response: {
            200: z.object({
              tenantId: z.string(),
              receipts: z.array(receiptSchema),
              nextAfter: z.number().int(),
            }),
          },
        },
        onRequest: admin,
      },
      async (req) => {
        const { tenantId } = keyCaller(req)
        const receipts = await deps.sor.stores.receipts.list(tenantId, req.query.after, req.query.limit)
        return { tenantId, receipts: receipts.map(wire), nextAfter: receipts.at(-1)?.seq ?? req.query.after }
      },
    )

    app.get(
      '/v1/receipts/stats',
      {
        schema: {
          summary: 'Decision counts over the last 24 hours',
          description:
            'REVOKE counts REVOKE receipts; ALLOW, DENY and STEP_UP count CHECK receipts by decision. At most the most recent 5000 receipts are counted; `truncated` says more exist, and the counts are then a floor. Accepts an admin API key or a portal session (its cookie, docs/portal.md); a request with an Authorization header is judged by the key alone.',
          response: {
            200: z.object({
              tenantId: z.string(),
              byDecision: z.object({
                ALLOW: z.number().int(),
                DENY: z.number().int(),
                REVOKE: z.number().int(),
                STEP_UP: z.number().int(),
              }),
              total: z.number().int(),
              cap: z.number().int(),
              truncated: z.boolean(),
              since: z.number().int(),
              windowSeconds: z.number().int(),
            }),
          },
        },
        onRequest: async (req, reply) => {
          // Without a bearer credential, a portal session may stand in; anything else is the key check.
          if (req.headers.authorization === undefined && deps.portalSessions) {
            const session = await portalSessionOf(req, deps.portalSessions)
            if (session) {
              req.caller = session.caller
              return
            }
          }
          await admin.call(app, req, reply)
        },
      },
      async (req) => {
        const { tenantId } = keyCaller(req)
        const since = nowSeconds(deps.clock) - STATS_WINDOW_SECONDS
        const counts = await deps.reader.decisionCounts(tenantId, since, STATS_CAP)
        const byDecision = { ALLOW: 0, DENY: 0, REVOKE: 0, STEP_UP: 0 }
        for (const d of DECISIONS) byDecision[d] = counts.byDecision[d] ?? 0
        return {
          tenantId,
          byDecision,
          total: Object.values(byDecision).reduce((a, b) => a + b, 0),
          cap: STATS_CAP,
          truncated: counts.truncated,
          since,
          windowSeconds: STATS_WINDOW_SECONDS,
        }
      },
    )

    app.get(
      '/v1/receipts/verify',
      {
        schema: {
          summary: "Recompute the tenant's hash chain",
          description:
            'Recomputes every receipt in seq [from, to] (default: the whole log) against its hash, its predecessor, its indexed columns and every signed checkpoint in the range; when the range reaches the head, the head too. When `valid` is false, `firstInvalidSeq` and `reason` say where and why.',
          querystring: z
            .object({ from: seqParam.pipe(z.number().min(1)).optional(), to: seqParam.optional() })
            .refine((q) => q.from === undefined || q.to === undefined || q.to >= q.from, {
              message: 'to must not be less than from',
            }),
          response: {
            200: z.object({
              tenantId: z.string(),
              valid: z.boolean(),
              checked: z.number().int(),
              headSeq: z.number().int(),
              headHash: z.string(),
              from: z.number().int(),
              to: z.number().int(),
              checkpoint: z
                .object({ seq: z.number().int(), hash: z.string(), at: z.number().int() })
                .nullable(),
              firstInvalidSeq: z.number().int().optional(),
              reason: z.string().optional(),
              message: z.string().optional(),
            }),
          },
        },
        onRequest: admin,
      },
      async (req, reply) => {
        const { tenantId } = keyCaller(req)
        const v = await verifyStoredLog(
          { reader: deps.reader, checkpoints: deps.checkpoints, publicKey: deps.publicKey },
          tenantId,
          { from: req.query.from, to: req.query.to },
          clientLeaves(reply.raw),
        )
        const { checkpoint, ...rest } = v
        return {
          ...rest,
          checkpoint: checkpoint ? { seq: checkpoint.seq, hash: checkpoint.hash, at: checkpoint.at } : null,
        }
      },
    )

    app.get(
      '/v1/receipts/export',
      {
        schema: {
          summary: 'Export the log as JSON Lines, with a signed checkpoint of its head',
          description:
            'Line 1 is a header, line 2 a signed checkpoint of the head at export time, then one receipt per line in seq order (every line RFC 8785 canonical JSON). Verify it offline with `writegate verify <file> --public-key <file>`. See docs/audit.md.',
          produces: ['application/x-ndjson'],
        },
        onRequest: admin,
      },
      async (req, reply) => {
        const { tenantId } = keyCaller(req)
        // Anchors the head being exported, so a truncated copy is detectable offline.
        const checkpoint = await deps.checkpointer.checkpointTenant(tenantId)
        reply
          .header('content-type', 'application/x-ndjson; charset=utf-8')
          .header('content-disposition', `attachment; filename="writegate-audit-${tenantId}.jsonl"`)
          .header('cache-control', 'no-store')
        return reply.send(exportLogStream(deps.reader, tenantId, checkpoint))
      },
    )

    app.get(
      '/v1/receipts/stream',
      {
        schema: {
          summary: 'Stream receipts as Server-Sent Events',
          description:
            'text/event-stream: each receipt is `id: <seq>`, `event: receipt`, `data: <receipt JSON>`. Starts after `since` (default 0: the whole log) or, when present, after the `Last-Event-ID` header (which wins, as browsers resend it on reconnect). Gap-free and in order across reconnects; `: keepalive` comments at least every 15 s.',
          querystring: z.object({ since: seqParam.optional() }),
          headers: z.looseObject({ 'last-event-id': seqParam.optional() }),
          produces: ['text/event-stream'],
        },
        onRequest: admin,
      },
      async (req, reply) => {
        const { tenantId } = keyCaller(req)
        const cursor = req.headers['last-event-id'] ?? req.query.since ?? 0
        const bearer = bearerOf(req.headers.authorization)
        // HEAD opens nothing, and so takes no slot.
        const slot = req.method === 'HEAD' ? null : deps.streamSlots.take(tenantId)
        if (slot !== null && 'limit' in slot) fail(ERRORS.streamLimitReached, { limit: slot.limit })
        reply.hijack()
        if (req.method === 'HEAD') {
          // HEAD is GET without the body. A stream's headers leave with its first chunk, which
          // HEAD never sends: answer them alone, and open nothing.
          reply.raw.writeHead(200, RECEIPT_STREAM_HEADERS)
          reply.raw.end()
          return
        }
        const stream = startReceiptStream(reply.raw, tenantId, cursor, {
          reader: deps.reader,
          wakeups: deps.wakeups,
          keepaliveMs: deps.streamKeepaliveMs,
          logger: req.log,
          stillAuthorized: async () => {
            const c = await deps.auth.apiKey(bearer)
            if (c === null || c.dead !== null || c.scope !== 'admin' || c.tenantId !== tenantId) return false
            // Ends when the sponsor's roster names the key or its principal, as the route refuses it.
            return (await deps.auth.rosterBar(c)) === null
          },
        })
        streams.add(stream)
        void stream.done.then(() => {
          streams.delete(stream)
          slot?.release()
        })
      },
    )

    app.get(
      '/v1/receipts/:receiptId',
      {
        schema: {
          summary: 'Get one receipt',
          description: "404 for a missing receipt and for another tenant's (the two are indistinguishable).",
          params: z.object({ receiptId: z.string().min(1).max(128) }),
          response: { 200: receiptSchema },
        },
        onRequest: admin,
      },
      async (req) => {
        const { tenantId } = keyCaller(req)
        const receipt = await deps.sor.stores.receipts.get(tenantId, req.params.receiptId)
        if (!receipt) fail(ERRORS.receiptNotFound)
        return wire(receipt)
      },
    )
  }
}
