import type { FastifyInstance } from 'fastify'
import { exportLogStream } from '../../audit/log-export.js'
import { verifyStoredLog } from '../../audit/log-verifier.js'
import { ERRORS, fail } from '../../core/errors.js'
import { clientLeaves } from '../../node-http/client-leaves.js'
import { auditPage, type ReceiptQuery, receiptPage, type VerifyView } from '../pages/audit.js'
import { sendPage, sessionOf } from '../portal-http.js'
import { searchReceipts } from '../receipt-search.js'
import { type PortalDeps, requirePage } from './route-kit.js'

/** Audit: receipt search, one receipt, chain verification, the export. */
export function auditRoutes(app: FastifyInstance, deps: PortalDeps): void {
  app.get('/portal/audit', { preHandler: requirePage }, async (req, reply) => {
    const session = sessionOf(req)
    const raw = req.query as Record<string, unknown>
    const field = (k: string) =>
      typeof raw[k] === 'string' && raw[k] !== '' ? (raw[k] as string).slice(0, 200) : undefined
    const query: ReceiptQuery = {
      kind: field('kind'),
      decision: field('decision'),
      verb: field('verb'),
      principal: field('principal'),
      system: field('system'),
      text: field('text'),
    }
    const tenantId = session.caller.tenantId
    const found = await searchReceipts({ stores: deps.sor.stores, reader: deps.reader }, tenantId, query)
    let verify: VerifyView | undefined
    if (field('verify') === '1') {
      const v = await verifyStoredLog(
        { reader: deps.reader, checkpoints: deps.checkpoints, publicKey: deps.publicKey },
        tenantId,
        {},
        clientLeaves(reply.raw),
      )
      verify = {
        valid: v.valid,
        checked: v.checked,
        headSeq: v.headSeq,
        firstInvalidSeq: v.firstInvalidSeq,
        reason: v.reason,
      }
    }
    return sendPage(reply, auditPage(session, { query, ...found, ...(verify ? { verify } : {}) }))
  })

  app.get('/portal/audit/receipts/:receiptId', { preHandler: requirePage }, async (req, reply) => {
    const session = sessionOf(req)
    const id = (req.params as { receiptId: string }).receiptId
    const receipt = id.length <= 128 ? await deps.sor.stores.receipts.get(session.caller.tenantId, id) : null
    if (!receipt) fail(ERRORS.receiptNotFound)
    return sendPage(reply, receiptPage(session, receipt))
  })

  app.get('/portal/audit/export', async (req, reply) => {
    const session = sessionOf(req)
    const tenantId = session.caller.tenantId
    const checkpoint = await deps.checkpointer.checkpointTenant(tenantId)
    reply
      .header('content-type', 'application/x-ndjson; charset=utf-8')
      .header('content-disposition', `attachment; filename="writegate-audit-${tenantId}.jsonl"`)
    return reply.send(exportLogStream(deps.reader, tenantId, checkpoint))
  })
}
