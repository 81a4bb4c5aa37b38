import { connect, createServer, type Socket } from 'node:net'
import type { Test } from 'tap'

/**
 * A TCP relay in front of a real server (Postgres, Redis) that a test can make misbehave: stall
 * (read nothing more either way; what is sent waits in the sockets) and resume, or lose one reply
 * and cut the connection, as a dying connection does. Closed at teardown.
 */
export async function startTcpRelay(t: Test, target: URL, defaultPort: number) {
  const sockets = new Set<Socket>()
  let stalled = false
  let cutAt: string | null = null
  const server = createServer((client) => {
    const upstream = connect(Number(target.port || defaultPort), target.hostname)
    sockets.add(client).add(upstream)
    for (const [a, b] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      a.on('error', () => b.destroy())
      a.on('close', () => b.destroy())
      if (stalled) a.pause()
    }
    client.on('data', (d) => upstream.write(d))
    upstream.on('data', (d) => {
      if (cutAt !== null && d.includes(cutAt)) {
        cutAt = null
        client.destroy()
        upstream.destroy()
        return
      }
      client.write(d)
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(
    () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy()
        server.close(() => r())
      }),
  )
  const url = new URL(target)
  url.hostname = '127.0.0.1'
  url.port = String((server.address() as { port: number }).port)
  return {
    /** The target's URL, pointed at the relay. */
    url: url.toString(),
    stall() {
      stalled = true
      for (const s of sockets) s.pause()
    },
    resume() {
      stalled = false
      for (const s of sockets) s.resume()
    },
    /**
     * The connections open now read nothing more, either way, for good; new ones pass. What a
     * frozen peer or a broken middlebox does to a connection: open, never answering.
     */
    freezeOpen() {
      for (const s of sockets) s.pause()
    },
    /** The server's next chunk holding `text` is dropped, and both sides are cut. */
    cutAtReply(text: string) {
      cutAt = text
    },
    /** Whether the reply armed by cutAtReply was dropped. */
    get cut() {
      return cutAt === null
    },
  }
}
