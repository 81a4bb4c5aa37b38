import type { Socket } from 'node:net'
import { reachedAtLoopback } from './local-clients.js'

export interface ServedClientsDeps {
  /** Serve writes to clients that reach the proxy at a non-loopback address (proxy.remoteClients). */
  remoteClients?: boolean | undefined
}

export function createServedClients(deps: ServedClientsDeps): { servesClient: (socket: Socket) => boolean } {
  /**
   * Whether a client may write through this proxy: its own pod's, unless remote ones are served
   * too. Judged once per connection (kept-alive ones carry many requests).
   */
  const localSockets = new WeakMap<Socket, boolean>()
  function servesClient(socket: Socket): boolean {
    if (deps.remoteClients === true) return true
    let local = localSockets.get(socket)
    if (local === undefined) {
      local = reachedAtLoopback(socket.localAddress)
      localSockets.set(socket, local)
    }
    return local
  }

  return { servesClient }
}
