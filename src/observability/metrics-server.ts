import { createServer, type Server } from 'node:http'
import type { Registry } from 'prom-client'
import { ERRORS } from '../core/errors.js'
import { guardServer } from '../node-http/guarded-server.js'
import type { Logger } from './logger.js'

/** Serves /metrics on its own port, away from agent and API traffic. */
export async function startMetricsServer(
  registry: Registry,
  host: string,
  port: number,
  logger: Logger,
): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    // HEAD answers as GET does, without the body (Node drops it).
    if ((req.method === 'GET' || req.method === 'HEAD') && req.url?.split('?')[0] === '/metrics') {
      registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': registry.contentType })
          res.end(text)
        },
        () => {
          res.writeHead(500, { 'content-type': 'application/json' })
          res.end(JSON.stringify({ error: 'metrics unavailable', code: ERRORS.internal.code }))
        },
      )
      return
    }
    res.writeHead(404, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ error: ERRORS.notFound.message, code: ERRORS.notFound.code }))
  })
  guardServer(server, logger)
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => resolve())
  })
  const addr = server.address()
  return {
    server,
    port: typeof addr === 'object' && addr ? addr.port : port,
    close: () => new Promise((r) => server.close(() => r())),
  }
}
