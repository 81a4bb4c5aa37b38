import type { Socket } from 'node:net'
import { createServer as createTlsServer, TLSSocket, type Server as TlsServer } from 'node:tls'
import type { Logger } from '../observability/logger.js'
import type { Metrics } from '../observability/metrics.js'
import type { LeafMinter } from '../tls/leaf-minter.js'

export interface TlsInterception {
  /**
   * Terminates a CONNECT tunnel to `host:port` with a leaf minted for `host`, and hands the
   * decrypted connection to `serve` (the proxy's own HTTP server, so every request in it takes
   * the same gated path as plain HTTP). Resolves false when no leaf can be minted (the tunnel
   * is the caller's to refuse).
   */
  intercept(
    socket: Socket,
    head: Buffer,
    host: string,
    port: number,
    serve: (tls: TLSSocket) => void,
  ): Promise<boolean>
  /**
   * The host an intercepted connection was opened for, with its port when the client named it
   * (a CONNECT does; an SNI does not); undefined for any other socket.
   */
  authorityOf(socket: unknown): { host: string; port: number | null } | undefined
  /**
   * Transparent mode: a TLS server whose ClientHello's SNI picks the host. No SNI, or a host
   * `enrolled` refuses, fails the handshake; a secure connection goes to `serve`.
   */
  tlsServer(enrolled: (host: string) => Promise<boolean>, serve: (tls: TLSSocket) => void): TlsServer
}

export function createTlsInterception(deps: {
  minter: LeafMinter
  handshakeTimeoutMs: number
  metrics: Metrics
  logger: Logger
}): TlsInterception {
  const { minter, metrics, logger } = deps
  const authorities = new WeakMap<object, { host: string; port: number | null }>()

  return {
    tlsServer(enrolled, serve) {
      const server = createTlsServer({
        ALPNProtocols: ['http/1.1'],
        handshakeTimeout: deps.handshakeTimeoutMs,
        SNICallback: (servername, done) => {
          const host = servername.toLowerCase()
          enrolled(host)
            .then(async (ok) => {
              if (!ok) {
                metrics.tlsRefused('sni_not_enrolled')
                return done(new Error(`${host} is no enrolled https host`))
              }
              done(null, await minter.contextFor(host))
            })
            .catch((err: Error) => {
              metrics.tlsRefused('outside_ca')
              done(err)
            })
        },
      })
      // Errors before the handshake completes (no SNI, an untrusting client, garbage, a stall).
      server.on('tlsClientError', (err, socket) => {
        metrics.tlsRefused(/timed? ?out/i.test(err.message) ? 'handshake_timeout' : 'handshake_failed')
        logger.debug({ code: (err as NodeJS.ErrnoException).code }, 'TLS port: handshake refused')
        socket.destroy()
      })
      server.on('secureConnection', (tls: TLSSocket) => {
        const host = (tls as TLSSocket & { servername?: string | false }).servername
        if (!host) return tls.destroy()
        authorities.set(tls, { host: host.toLowerCase(), port: null })
        metrics.tlsIntercepted()
        serve(tls)
      })
      return server
    },

    authorityOf: (socket) => (socket && typeof socket === 'object' ? authorities.get(socket) : undefined),

    async intercept(socket, head, host, port, serve) {
      let context: Awaited<ReturnType<LeafMinter['contextFor']>>
      try {
        context = await minter.contextFor(host)
      } catch (err) {
        metrics.tlsRefused('outside_ca')
        logger.warn(
          { host, err: (err as Error).message },
          'CONNECT to an enrolled host the interception CA may not vouch for',
        )
        return false
      }
      if (socket.destroyed) return true
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
      // Bytes the client sent after its CONNECT (its ClientHello, if it did not wait) come first.
      if (head.length > 0) socket.unshift(head)
      const tls = new TLSSocket(socket, {
        isServer: true,
        secureContext: context,
        // HTTP/1.1 only: the proxy's HTTP server speaks it, and a client offering h2 falls back.
        ALPNProtocols: ['http/1.1'],
        // A client certificate is neither asked for nor used.
        requestCert: false,
      })
      authorities.set(tls, { host, port })
      const stalled = setTimeout(() => {
        metrics.tlsRefused('handshake_timeout')
        tls.destroy()
        socket.destroy()
      }, deps.handshakeTimeoutMs)
      stalled.unref()
      let secure = false
      tls.on('error', (err: NodeJS.ErrnoException) => {
        clearTimeout(stalled)
        // Before the handshake: a client that does not trust the CA, or garbage; after: a reset.
        if (!secure) {
          metrics.tlsRefused(
            /alert|certificate|unknown ca/i.test(err.message)
              ? 'client_rejected_certificate'
              : 'handshake_failed',
          )
          logger.debug({ host, code: err.code }, 'intercepted TLS handshake failed')
        }
        tls.destroy()
        socket.destroy()
      })
      tls.once('secure', () => {
        secure = true
        clearTimeout(stalled)
        metrics.tlsIntercepted()
        serve(tls)
      })
      socket.once('close', () => clearTimeout(stalled))
      return true
    },
  }
}
