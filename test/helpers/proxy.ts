import { request } from 'node:http'
import type { Test } from 'tap'
import { parseSettings } from '../../src/config/load.js'
import type { ControlPlane } from '../../src/control/control-plane.js'
import type { GatedWrites } from '../../src/gate/gated-write.js'
import { createLogger, type Logger } from '../../src/observability/logger.js'
import { type RunningProxy, startProxy } from '../../src/proxy/proxy-process.js'
import { sleep } from './wait.js'

export interface AgentReply {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: Buffer
  // biome-ignore lint/suspicious/noExplicitAny: replies are inspected loosely
  json(): any
}

/** Sends one request to a proxy the way an agent would (reverse, forward or transparent). */
export function agentRequest(
  port: number,
  opts: { method: string; path: string; headers?: Record<string, string>; body?: string | Buffer },
): Promise<AgentReply> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: opts.method,
        path: opts.path,
        headers: opts.headers ?? {},
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => {
          const body = Buffer.concat(chunks)
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body,
            json: () => JSON.parse(body.toString('utf8')),
          })
        })
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    if (opts.body !== undefined) req.write(opts.body)
    req.end()
  })
}

/**
 * POSTs `body` with `Expect: 100-continue`, holding the body back until the proxy answers
 * 100 Continue (as curl and most clients do): tells whether it was asked for, and sent.
 */
export function agentRequestExpectingContinue(
  port: number,
  path: string,
  body: string,
): Promise<{ status: number; continued: boolean; sentBody: boolean; reply: string }> {
  return new Promise((resolve, reject) => {
    let continued = false
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path,
        headers: {
          'content-type': 'application/json',
          expect: '100-continue',
          'content-length': body.length,
        },
        agent: false,
      },
      (res) => {
        let reply = ''
        res.setEncoding('utf8')
        res.on('data', (c: string) => {
          reply += c
        })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, continued, sentBody: continued, reply }))
      },
    )
    req.on('continue', () => {
      continued = true
      req.end(body)
    })
    req.on('error', reject)
    req.flushHeaders()
  })
}

/**
 * An embedded proxy over a test control plane's in-memory hot store and gate. Its systems are
 * the tenant's enrolled ones, plus those of `routesFile` (deprecated) when one is given.
 */
export async function startEmbeddedProxy(
  t: Test,
  cp: ControlPlane,
  routesFile: string | null,
  env: Record<string, string>,
  extra: Record<string, unknown> = {},
  opts: {
    logger?: Logger
    systemsFile?: string
    settings?: Record<string, unknown>
    /** The gated-write step, wrapped (to hold a decision at a chosen moment, say). */
    writes?: GatedWrites
  } = {},
): Promise<RunningProxy> {
  const settings = parseSettings({
    log: { level: 'silent' },
    ...(opts.settings ?? {}),
    ...(opts.systemsFile ? { systemsFile: opts.systemsFile } : {}),
    proxy: { port: 0, host: '127.0.0.1', ...(routesFile ? { routesFile } : {}), ...extra },
  })
  const parts = {
    ...cp,
    ...(opts.logger ? { logger: opts.logger } : {}),
    ...(opts.writes ? { writes: opts.writes } : {}),
  }
  const running = await startProxy(settings, parts, { metricsServer: false, env })
  t.teardown(() => running.close())
  return running
}

/**
 * Polls the proxy's readiness until it is ready; throws with the last reason it gave if it is
 * not by `timeoutMs` (a liveness bound for a loaded machine: a test must not go on unready).
 */
export async function waitReady(running: Pick<RunningProxy, 'proxy'>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const r = await running.proxy.readiness()
    if (r.ready) return
    if (Date.now() > deadline)
      throw new Error(`the proxy is not ready after ${timeoutMs} ms: ${r.reason ?? 'no reason given'}`)
    await sleep(20)
  }
}

export interface LogLine {
  level: number
  msg: string
  [field: string]: unknown
}

/** A logger that keeps every line from debug up, for tests that assert what was (not) logged. */
export function capturingLogger(): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = []
  const logger = createLogger('debug', {
    write(line: string) {
      lines.push(JSON.parse(line) as LogLine)
    },
  })
  return { logger, lines }
}

/** pino's numeric levels. */
export const LOG_LEVEL = { debug: 20, info: 30, warn: 40, error: 50 } as const
