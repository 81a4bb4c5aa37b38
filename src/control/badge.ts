import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import type { AuditLog } from '../audit/audit-log.js'
import { createBadgeCounts } from '../badge/badge-counts.js'
import { renderBadgeSvg } from '../badge/badge-svg.js'
import { type Clock, nowSeconds } from '../core/clock.js'
import { classifyCredential, newBadgeToken } from '../core/credentials.js'
import { ERRORS, fail } from '../core/errors.js'
import { newId } from '../core/ids.js'
import { digestsEqual, hashSecret } from '../core/secret-hash.js'
import type { Authenticator } from '../identity/authenticator.js'
import { actorOf } from '../identity/caller.js'
import { credentialReceipt } from '../identity/credential-receipt.js'
import type { SystemOfRecord } from '../store/ports/index.js'
import type { RateLimitStore } from '../store/ports/rate-limit.js'
import type { ReceiptReader } from '../store/ports/receipt-reader.js'
import { keyCaller, requireKey } from './http/auth.js'

export const BADGE_WINDOW_SECONDS = 30 * 86_400
export const BADGE_VIEWS_PER_MINUTE = 120
const LABEL_RULES = 'at most 40 characters of A-Z a-z 0-9, space, underscore, period and hyphen'

export interface BadgeDeps {
  auth: Authenticator
  /** Badge tokens are credentials: issuing and revoking one is on record, in the same transaction. */
  audit: AuditLog
  sor: SystemOfRecord
  reader: ReceiptReader
  rateLimits: RateLimitStore
  clock: Clock
  /** Base of badge URLs; without it, the request's own origin. */
  publicUrl?: string | undefined
}

/** How long a badge shows the count it last read, and for how many tenants at most. */
export const BADGE_COUNT_TTL_SECONDS = 300
const BADGE_COUNTS_KEPT = 10_000

export function badgeRoutes(deps: BadgeDeps): FastifyPluginAsyncZod {
  return async (app) => {
    const admin = requireKey(deps.auth, { scope: 'admin' })
    const countFor = createBadgeCounts({
      load: (tenantId, nowMs) =>
        deps.reader.gatedWrites(tenantId, Math.floor(nowMs / 1000) - BADGE_WINDOW_SECONDS),
      ttlMs: BADGE_COUNT_TTL_SECONDS * 1000,
      max: BADGE_COUNTS_KEPT,
    })

    /** The live token's record, compared in constant time; null for anything else. */
    async function liveToken(token: string) {
      if (classifyCredential(token) !== 'badge') return null
      const hash = hashSecret(token)
      const found = await deps.sor.stores.badgeTokens.findLive(hash)
      return found && digestsEqual(found.tokenHash, hash) ? found : null
    }

    app.post(
      '/v1/badge/tokens',
      {
        schema: {
          summary: 'Create a public badge token',
          description:
            'The token is shown once and stored only as SHA-256. The label is a private note: it is never rendered.',
          body: z
            .object({
              label: z
                .string()
                .max(40, LABEL_RULES)
                .regex(/^[A-Za-z0-9 _.-]*$/, LABEL_RULES)
                .optional(),
            })
            .strict()
            .nullish(),
          response: {
            201: z.object({
              badgeToken: z.string(),
              badgeUrl: z.string(),
              label: z.string(),
              markdown: z.string(),
              note: z.string(),
            }),
          },
        },
        onRequest: admin,
      },
      async (req, reply) => {
        const caller = keyCaller(req)
        const { tenantId } = caller
        const label = req.body?.label ?? ''
        const badgeToken = newBadgeToken()
        const tokenHash = hashSecret(badgeToken)
        const at = nowSeconds(deps.clock)
        // Not on record, so not issued: the token and its receipt commit together.
        await deps.sor.transaction(async (stores) => {
          await stores.badgeTokens.create({ id: newId('badge'), tenantId, tokenHash, label, createdAt: at })
          await deps.audit.appendWith(stores, [
            credentialReceipt({
              tenantId,
              kind: 'CREDENTIAL_ISSUED',
              credential: 'badge_token',
              at,
              actor: actorOf(caller),
              keyId: caller.keyId,
            }),
          ])
        })
        const base = (deps.publicUrl ?? `${req.protocol}://${req.host}`).replace(/\/+$/, '')
        const badgeUrl = `${base}/v1/badge/${badgeToken}.svg`
        return reply.code(201).send({
          badgeToken,
          badgeUrl,
          label,
          markdown: `![gated writes](${badgeUrl})`,
          note: 'Shown once: writegate stores only a hash of this token. The badge shows only the count of gated writes over the last 30 days; the label is never shown. Revoke it with DELETE /v1/badge/tokens/{token}.',
        })
      },
    )

    app.delete(
      '/v1/badge/tokens/:token',
      {
        schema: {
          summary: 'Revoke a badge token',
          description: 'Afterwards its SVG answers 404.',
          params: z.object({ token: z.string().min(1).max(200) }),
        },
        onRequest: admin,
      },
      async (req, reply) => {
        const caller = keyCaller(req)
        const { tenantId } = caller
        const { token } = req.params
        const at = nowSeconds(deps.clock)
        // The revocation and its receipt commit together, or neither does.
        const revoked =
          classifyCredential(token) === 'badge' &&
          (await deps.sor.transaction(async (stores) => {
            if (!(await stores.badgeTokens.revoke(tenantId, hashSecret(token), at))) return false
            await deps.audit.appendWith(stores, [
              credentialReceipt({
                tenantId,
                kind: 'CREDENTIAL_REVOKED',
                credential: 'badge_token',
                at,
                actor: actorOf(caller),
                keyId: caller.keyId,
              }),
            ])
            return true
          }))
        if (!revoked) fail(ERRORS.badgeNotFound)
        return reply.code(204).send()
      },
    )

    app.get(
      '/v1/badge/:file',
      {
        schema: {
          summary: 'The public badge (path: the badge token with a .svg suffix)',
          description:
            'No credential. Shows the count of CHECK and EXECUTE receipts over the trailing 30 days, read at most every 5 minutes per tenant: green from 1, grey at 0. 404 for an unknown or revoked token; 429 past 120 views per minute per token.',
          params: z.object({ file: z.string().min(1).max(210) }),
          produces: ['image/svg+xml'],
        },
      },
      async (req, reply) => {
        const { file } = req.params
        const found = file.endsWith('.svg') ? await liveToken(file.slice(0, -'.svg'.length)) : null
        if (!found) fail(ERRORS.badgeNotFound)
        const now = deps.clock.nowMs()
        const verdict = await deps.rateLimits.hit(`badge:${found.tokenHash}`, BADGE_VIEWS_PER_MINUTE, 60, now)
        if (!verdict.allowed) {
          fail(
            ERRORS.rateLimited,
            { limit: BADGE_VIEWS_PER_MINUTE, windowSeconds: 60, retryAfter: verdict.retryAfterSeconds },
            { headers: { 'Retry-After': String(verdict.retryAfterSeconds) } },
          )
        }
        const count = await countFor(found.tenantId, now)
        return reply
          .header('content-type', 'image/svg+xml; charset=utf-8')
          .header('cache-control', 'public, max-age=3600')
          .header('x-content-type-options', 'nosniff')
          .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'")
          .send(renderBadgeSvg(count))
      },
    )
  }
}
