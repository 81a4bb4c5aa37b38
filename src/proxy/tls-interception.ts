import { constants } from 'node:crypto'
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net'
import { createServer as createTlsServer, TLSSocket } from 'node:tls'
import type { Logger } from '../observability/logger.js'
import type { Metrics } from '../observability/metrics.js'
import { readClientHello } from '../tls/client-hello.js'
import type { LeafMinter } from '../tls/leaf-minter.js'

/** What the TLS port does with a connection, by the SNI of its ClientHello. */
/**
 * How the TLS port handles a ClientHello's SNI: intercepted and gated, tunnelled opaque (a
 * pass-through host), refused, or refused because the proxy cannot tell whether the host is
 * enrolled (no identity or snapshot yet, Redis unreachable): never tunnelled on a guess.
 */
export type TlsPortRoute = 'intercept' | 'tunnel' | 'refuse' | 'unavailable'

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
   * Transparent mode's TLS port. The ClientHello is read before any handshake, and its SNI
   * routes the connection: `intercept` (an enrolled https host) terminates it with a minted
   * leaf and hands the secure connection to `serve`; `tunnel` (a pass-through host) hands the
   * raw socket and the hello to `tunnel`, opaque and ungated; no SNI, `refuse`, or bytes that
   * are not a ClientHello close it. Only an intercepted connection is decrypted.
   */
  tlsPort(
    /** Whether a connection may be served at all (refused before a byte is read: `remote_client`). */
    accepts: (socket: Socket) => boolean,
    route: (host: string) => Promise<TlsPortRoute>,
    serve: (tls: TLSSocket) => void,
    tunnel: (socket: Socket, hello: Buffer, host: string) => void,
  ): NetServer
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
    tlsPort(accepts, route, serve, tunnel) {
      const terminating = createTlsServer({
        ALPNProtocols: ['http/1.1'],
        handshakeTimeout: deps.handshakeTimeoutMs,
        // As the minted contexts say, on the server itself: OpenSSL keeps the options of the
        // context a connection started on, not of the one its SNI switched it to (found in
        // review: the TLS port renegotiated, which the CONNECT path refuses).
        minVersion: 'TLSv1.2',
        secureOptions: constants.SSL_OP_NO_RENEGOTIATION,
        SNICallback: (servername, done) => {
          // Routed on this name already; asked again in case the state changed in between.
          const host = servername.toLowerCase()
          route(host)
            .then(async (how) => {
              if (how !== 'intercept') {
                metrics.tlsRefused('sni_not_enrolled')
                return done(new CountedRefusal(`${host} is no enrolled https host`))
              }
              done(null, await minter.contextFor(host))
            })
            .catch((err: Error) => {
              metrics.tlsRefused('outside_ca')
              done(new CountedRefusal(err.message))
            })
        },
      })
      // Errors before the handshake completes (an untrusting client, a stall).
      terminating.on('tlsClientError', (err, socket) => {
        // A refusal the SNI callback counted (Node fails the handshake with its error) is not
        // counted again (found in review: each counted twice).
        if (!(err instanceof CountedRefusal))
          metrics.tlsRefused(/timed? ?out/i.test(err.message) ? 'handshake_timeout' : 'handshake_failed')
        logger.debug({ code: (err as NodeJS.ErrnoException).code }, 'TLS port: handshake refused')
        socket.destroy()
      })
      terminating.on('secureConnection', (tls: TLSSocket) => {
        const host = (tls as TLSSocket & { servername?: string | false }).servername
        if (!host) return tls.destroy()
        authorities.set(tls, { host: host.toLowerCase(), port: null })
        metrics.tlsIntercepted()
        serve(tls)
      })

      return createNetServer((socket) => {
        socket.on('error', () => socket.destroy())
        if (!accepts(socket)) {
          metrics.tlsRefused('remote_client')
          socket.destroy()
          return
        }
        // What arrived, joined only once enough is there to read further: joining and reading
        // again at every arrival costs the square of a hello sent a byte at a time.
        let chunks: Buffer[] = []
        let arrived = 0
        let need = 0
        let held: Buffer = Buffer.alloc(0)
        const refuse = (reason: string) => {
          metrics.tlsRefused(reason)
          socket.destroy()
        }
        const stalled = setTimeout(() => refuse('handshake_timeout'), deps.handshakeTimeoutMs)
        stalled.unref()
        socket.once('close', () => clearTimeout(stalled))
        const onData = (chunk: Buffer) => {
          chunks.push(chunk)
          arrived += chunk.length
          if (arrived < need) return
          held = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, arrived)
          chunks = [held]
          const hello = readClientHello(held)
          if (hello.kind === 'incomplete') {
            need = hello.need
            return
          }
          socket.removeListener('data', onData)
          socket.pause()
          clearTimeout(stalled)
          if (hello.kind === 'not_tls') return refuse('handshake_failed')
          const host = hello.serverName
          if (host === null) return refuse('no_sni')
          route(host).then(
            (how) => {
              if (socket.destroyed) return
              if (how === 'refuse') return refuse('sni_not_enrolled')
              if (how === 'unavailable') return refuse('gate_unavailable')
              if (how === 'tunnel') return tunnel(socket, held, host)
              // The TLS server reads the hello again from the socket's buffer.
              socket.unshift(held)
              terminating.emit('connection', socket)
            },
            (err: Error) => {
              logger.warn({ host, err: err.message }, 'TLS port: routing a connection failed')
              refuse('handshake_failed')
            },
          )
        }
        socket.on('data', onData)
      })
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

/** A handshake refused, and counted, by the SNI callback. */
class CountedRefusal extends Error {}
