import { createServer } from 'node:http'
import fastifySwagger from '@fastify/swagger'
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  LogController,
} from 'fastify'
import {
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod'
import type { ApprovalService } from '../actions/approval-service.js'
import type { AuditLog } from '../audit/audit-log.js'
import type { Clock } from '../core/clock.js'
import { ERRORS } from '../core/errors.js'
import type { CheckService } from '../decision/check-service.js'
import type { TokenService } from '../decision/token-service.js'
import type { ExecuteService } from '../execute/execute-service.js'
import type { Authenticator } from '../identity/authenticator.js'
import type { IssuanceService } from '../identity/issuance-service.js'
import type { PrincipalService } from '../identity/principal-service.js'
import { answerClientError, guardServer } from '../node-http/guarded-server.js'
import type { Logger } from '../observability/logger.js'
import type { PolicyService } from '../policy/policy-service.js'
import type { VerbService } from '../policy/verb-service.js'
import { isPortalPath, PORTAL_SECURITY_HEADERS } from '../portal/portal-http.js'
import { portalRoutes } from '../portal/portal-routes.js'
import type { PortalSessions } from '../portal/portal-sessions.js'
import type { SandboxService } from '../sandbox/sandbox-service.js'
import type { SponsorService } from '../sponsor/sponsor-service.js'
import type { QuotaCounter } from '../store/ports/hot-store.js'
import type { SystemOfRecord } from '../store/ports/index.js'
import type { RateLimitStore } from '../store/ports/rate-limit.js'
import type { SystemService } from '../systems/system-service.js'
import { actionsRoutes } from './actions.js'
import { type AuditServices, registerAuditRoutes } from './audit-routes.js'
import { checksRoutes } from './checks.js'
import { executeRoutes } from './execute.js'
import { installErrorHandling } from './http/errors.js'
import { type HandlerDeadlines, installHandlerDeadlines } from './http/handler-deadlines.js'
import { installJsonBodyParser, installUrlGuard } from './http/json-body.js'
import { withAuthDocs } from './http/openapi-auth.js'
import { keysRoutes } from './keys.js'
import { meRoutes } from './me.js'
import { policiesRoutes } from './policies.js'
import { principalsRoutes } from './principals.js'
import { sandboxRoutes } from './sandbox.js'
import { sponsorRoutes } from './sponsor.js'
import { sponsorCredentialRoutes } from './sponsor-credentials.js'
import { systemsRoutes } from './systems.js'
import { verbsRoutes } from './verbs.js'

export const BODY_LIMIT_BYTES = 1024 * 1024

/** Everything the HTTP layer needs, already built by the composition root. */
export interface ControlServices {
  sor: SystemOfRecord
  auth: Authenticator
  issuance: IssuanceService
  principals: PrincipalService
  rateLimits: RateLimitStore
  quota: QuotaCounter
  clock: Clock
  policies: PolicyService
  verbs: VerbService
  checks: CheckService
  tokens: TokenService
  sponsor: SponsorService
  sandbox: SandboxService
  /** Receipts read side, stream, checkpoints, badge and manifests. */
  auditServices: AuditServices
  /** The append interface, for routes that record their own changes (badge tokens). */
  auditLog: AuditLog
  execute: ExecuteService
  approvals: ApprovalService
  systems: SystemService
  /** Null when the portal is off (`portal.enabled: false`). */
  portalSessions: PortalSessions | null
}

export interface ControlAppOptions {
  logger: Logger
  trustProxy: string[]
  issuancePerIpPerHour: number
  sandboxPerIpPerMinute: number
  checksPerMonth: number
  version: string
  /** Throws when a backing store is unreachable. */
  readiness: () => Promise<void>
  /** The portal session cookie lives this long at most (its absolute expiry). */
  portalSessionMaxSeconds: number
  /** How long a request may take before it is answered 503 (handler-deadlines.ts). */
  handlerDeadlines: HandlerDeadlines
}

const REQUEST_TIMEOUT_MS = 300_000
/** How long shutdown waits for requests in flight before cutting their connections. */
const CLOSE_GRACE_MS = 5_000

export async function buildControlApp(
  services: ControlServices,
  opts: ControlAppOptions,
): Promise<FastifyInstance> {
  const app = Fastify({
    // One guarded server (guarded-server.ts), with the timeouts fastify would give its own. A
    // factory also keeps fastify from adding unguarded servers of its own when the host is
    // `localhost` (one per address it resolves to).
    // A whole request within 5 minutes, as on gate-proxy (fastify's default, 0, let an upload
    // that stalls mid-body hold its connection, and shutdown, for ever).
    requestTimeout: REQUEST_TIMEOUT_MS,
    serverFactory: (handler, options) => {
      const server = guardServer(createServer(handler), opts.logger, { clientErrors: false })
      server.keepAliveTimeout = options.keepAliveTimeout as number
      server.requestTimeout = options.requestTimeout as number
      server.setTimeout(options.connectionTimeout as number)
      return server
    },
    clientErrorHandler: (err, socket) => answerClientError(err, socket, opts.logger),
    loggerInstance: opts.logger as FastifyBaseLogger,
    // One debug line per request from onResponse below, instead of fastify's two info lines.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: BODY_LIMIT_BYTES,
    trustProxy: opts.trustProxy.length > 0 ? opts.trustProxy : false,
    requestIdHeader: false,
    genReqId: () => crypto.randomUUID(),
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: 256 },
    // Errors the router raises before any hook: our JSON shape, and no echo of the URL.
    frameworkErrors: (err, req, res) => {
      const reply = res as unknown as FastifyReply
      // Sent before any hook runs: the portal's headers are set here for its paths.
      if (services.portalSessions && isPortalPath(req.url)) reply.headers(PORTAL_SECURITY_HEADERS)
      if (err.code === 'FST_ERR_MAX_PARAM_LENGTH')
        return reply.code(404).send({ error: ERRORS.notFound.message, code: ERRORS.notFound.code })
      return reply.code(400).send({ error: ERRORS.invalidRequest.message, code: ERRORS.invalidRequest.code })
    },
  }).withTypeProvider<ZodTypeProvider>()

  installHandlerDeadlines(app, opts.handlerDeadlines)
  app.decorateRequest('caller', null)
  app.setValidatorCompiler(validatorCompiler)
  app.setSerializerCompiler(serializerCompiler)
  installJsonBodyParser(app, BODY_LIMIT_BYTES)
  installUrlGuard(app)
  installErrorHandling(app)
  if (services.portalSessions) {
    // At the root, not in the portal's plugin: a path under /portal that no route answers, or one
    // refused before routing, gets the portal's headers too (found in review).
    app.addHook('onSend', async (req, reply) => {
      if (isPortalPath(req.url)) reply.headers(PORTAL_SECURITY_HEADERS)
    })
  }

  // Closing waits for requests in flight; one that would keep shutdown waiting is cut after a
  // grace (unref'd: it never holds the process, and on a closed server it finds nothing left).
  app.addHook('preClose', async () => {
    setTimeout(() => app.server.closeAllConnections(), CLOSE_GRACE_MS).unref()
  })

  app.addHook('onResponse', async (req, reply) => {
    req.log.debug({ req, res: reply, ms: Math.round(reply.elapsedTime) }, 'request completed')
  })

  await app.register(fastifySwagger, {
    openapi: {
      info: {
        title: 'writegate',
        description: 'Commit-time gate for software agents that write to other systems.',
        version: opts.version,
      },
      components: {
        securitySchemes: {
          apiKey: { type: 'http', scheme: 'bearer', description: 'API key (svc_…)' },
          sponsorToken: { type: 'http', scheme: 'bearer', description: 'Sponsor token (svc_sp_…)' },
        },
      },
    },
    transform: withAuthDocs(jsonSchemaTransform),
  })

  const s = services
  await app.register(
    keysRoutes({
      issuance: s.issuance,
      auth: s.auth,
      rateLimits: s.rateLimits,
      clock: s.clock,
      issuancePerIpPerHour: opts.issuancePerIpPerHour,
    }),
  )
  await app.register(
    meRoutes({
      auth: s.auth,
      sor: s.sor,
      quota: s.quota,
      clock: s.clock,
      checksPerMonth: opts.checksPerMonth,
    }),
  )
  await app.register(principalsRoutes({ principals: s.principals, auth: s.auth }))
  await app.register(sponsorCredentialRoutes({ issuance: s.issuance, auth: s.auth }))
  await app.register(policiesRoutes({ policies: s.policies, auth: s.auth }))
  await app.register(verbsRoutes({ verbs: s.verbs, auth: s.auth }))
  await app.register(checksRoutes({ checks: s.checks, tokens: s.tokens, auth: s.auth }))
  await app.register(sponsorRoutes({ sponsor: s.sponsor, auth: s.auth }))
  await app.register(
    sandboxRoutes({
      sandbox: s.sandbox,
      rateLimits: s.rateLimits,
      clock: s.clock,
      perIpPerMinute: opts.sandboxPerIpPerMinute,
    }),
  )
  await registerAuditRoutes(app, s.auditServices, s)
  if (s.portalSessions) {
    const a = s.auditServices
    await app.register(
      portalRoutes({
        sessions: s.portalSessions,
        auth: s.auth,
        sor: s.sor,
        approvals: s.approvals,
        sponsor: s.sponsor,
        policies: s.policies,
        principals: s.principals,
        reader: a.reader,
        checkpoints: a.checkpoints,
        checkpointer: a.checkpointer,
        wakeups: a.wakeups,
        publicKey: a.signingKey,
        clock: s.clock,
        streamKeepaliveMs: a.streamKeepaliveMs,
        streamSlots: a.streamSlots,
        sessionMaxSeconds: opts.portalSessionMaxSeconds,
      }),
    )
  }

  await app.register(executeRoutes({ execute: s.execute, auth: s.auth }))
  await app.register(actionsRoutes({ approvals: s.approvals, auth: s.auth }))
  await app.register(systemsRoutes({ systems: s.systems, auth: s.auth }))

  app.get('/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger())
  app.get('/healthz', { schema: { hide: true } }, async () => ({ ok: true }))
  app.get('/readyz', { schema: { hide: true } }, async (_req, reply) => {
    try {
      await opts.readiness()
      return { ready: true }
    } catch {
      return reply
        .code(503)
        .send({ ready: false, error: 'a backing store is unreachable', code: 'unavailable' })
    }
  })

  return app
}
