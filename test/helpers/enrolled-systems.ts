import type { ServerResponse } from 'node:http'
import type { Test } from 'tap'
import type { SystemsFile } from '../../src/config/systems.js'
import { RecordingUpstream } from './upstream.js'

/** One request as the upstream saw it, with its body as text. */
export interface Recorded {
  method: string
  url: string
  headers: Record<string, string | string[] | undefined>
  body: string
}

export type Responder = (req: Recorded, res: ServerResponse) => void | Promise<void>

export interface RecordingServer {
  origin: string
  port: number
  /** Every request received so far (a fresh copy on each read). */
  readonly requests: Recorded[]
  /** Replaces how the server answers (the default: 200 JSON `{"id":"re_1","ok":true}`). */
  respond(fn: Responder): void
  /** Runs before the answer, with the request already recorded (to look at the database, say). */
  onRequest(fn: (req: Recorded) => Promise<void>): void
}

export const defaultResponder: Responder = (_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' })
  res.end('{"id":"re_1","ok":true}')
}

/**
 * A loopback upstream (or attacker) for execute and approval tests: the shared
 * RecordingUpstream, with text bodies, a swappable responder and a hook that runs before
 * the answer.
 */
export async function startRecordingServer(t: Test): Promise<RecordingServer> {
  const upstream = await new RecordingUpstream().start()
  t.teardown(() => upstream.close())
  const asRecorded = (r: RecordingUpstream['received'][number]): Recorded => ({
    method: r.method,
    url: r.url,
    headers: r.headers,
    body: r.body.toString('utf8'),
  })
  let responder: Responder = defaultResponder
  let hook: ((req: Recorded) => Promise<void>) | null = null
  upstream.behaviour = async (_req, res) => {
    const rec = asRecorded(upstream.received.at(-1) as RecordingUpstream['received'][number])
    if (hook) await hook(rec)
    await responder(rec, res)
  }
  return {
    origin: upstream.origin,
    port: upstream.port,
    get requests() {
      return upstream.received.map(asRecorded)
    },
    respond: (fn) => {
      responder = fn
    },
    onRequest: (fn) => {
      hook = fn
    },
  }
}

/** The environment variable the test systems read their credential from. */
export const CREDENTIAL_ENV = 'WRITEGATE_TEST_BILLING_TOKEN'
export const CREDENTIAL_SECRET = 'sk_live_upstream_secret_never_shown'
process.env[CREDENTIAL_ENV] = CREDENTIAL_SECRET

/**
 * Routes for the tests' systems: payouts are `refund` writes; anything else under /v1/ maps
 * to `verify` (allowed by default), which is what most execute tests lease.
 */
export const TEST_ROUTES: SystemsFile['systems'][number]['routes'] = [
  { method: 'POST', path: '/v1/payouts', verb: 'refund' },
  ...(['GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH', 'DELETE'] as const).map((method) => ({
    method,
    path: '/v1/*',
    verb: 'verify',
  })),
]

/**
 * Enrolled systems for a tenant: sys_billing on `origin` (with an injected bearer credential
 * and refund tools, one with an undo), and sys_other, a second system of the same tenant.
 */
export function billingSystems(tenantId: string, origin: string, otherOrigin = origin): SystemsFile {
  return {
    passthrough: [],
    systems: [
      {
        systemId: 'sys_billing',
        kind: 'http',
        tenantId,
        upstream: origin,
        credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: CREDENTIAL_ENV },
        reads: 'pass',
        routes: TEST_ROUTES,
        tools: [
          {
            name: 'issue_refund',
            verb: 'refund',
            method: 'POST',
            pathTemplate: '/v1/refunds',
            target: '{charge}',
            params: {
              type: 'object',
              required: ['charge', 'amount'],
              additionalProperties: false,
              properties: {
                charge: { type: 'string', pattern: '^ch_[A-Za-z0-9]+$' },
                amount: { type: 'integer', minimum: 1 },
              },
            },
            revert: { tool: 'cancel_refund', params: { refund: '{result.id}' } },
          },
          {
            name: 'cancel_refund',
            verb: 'refund',
            method: 'POST',
            pathTemplate: '/v1/refunds/{refund}/cancel',
            params: {
              type: 'object',
              required: ['refund'],
              additionalProperties: false,
              properties: { refund: { type: 'string' } },
            },
          },
          {
            name: 'annotate',
            verb: 'refund',
            method: 'PATCH',
            pathTemplate: '/v1/charges/{charge}/notes',
            target: '{charge}',
            params: {
              type: 'object',
              required: ['charge', 'note'],
              properties: { charge: { type: 'string' }, note: { type: 'string' } },
            },
          },
        ],
      },
      {
        systemId: 'sys_other',
        kind: 'http',
        tenantId,
        upstream: otherOrigin,
        reads: 'pass',
        routes: TEST_ROUTES,
        tools: [],
      },
    ],
  }
}
