import { connect, createServer, type Server, type Socket } from 'node:net'
import t from 'tap'
import { openDatabase } from '../../src/store/postgres/connect.js'
import { TEST_DATABASE_URL } from '../helpers/servers.js'

/**
 * postgres.js fetches the server's array types as the first statement of every new connection.
 * A failure of that fetch (a restart, a failover or pg_terminate_backend while a connection is
 * starting; a statement timeout) was an unhandled rejection, which ends a Node process, and a
 * connection cut during it failed the first query on the reconnected socket with the old
 * socket's error (porsager/postgres#1192, #1205, #1223; patches/postgres+3.4.9.patch). tap fails
 * a test on any unhandled rejection.
 */

const TYPES_QUERY = "where a.typcategory = 'A'"

/** A Postgres ErrorResponse message. */
function errorResponse(severity: string, code: string, message: string): Buffer {
  const fields = Buffer.concat(
    [`S${severity}`, `V${severity}`, `C${code}`, `M${message}`].map((f) => Buffer.from(`${f}\0`)),
  )
  const body = Buffer.concat([fields, Buffer.from([0])])
  const head = Buffer.alloc(5)
  head.write('E', 0)
  head.writeInt32BE(body.length + 4, 1)
  return Buffer.concat([head, body])
}

const READY_FOR_QUERY = Buffer.from([0x5a, 0, 0, 0, 5, 0x49]) // 'Z', length 5, idle

/**
 * A TCP relay in front of the test Postgres that answers the first array-types fetch it sees
 * itself, with `fault`, instead of passing it on. Every later byte passes untouched.
 */
async function faultyRelay(fault: 'terminated' | 'cancelled') {
  const target = new URL(TEST_DATABASE_URL)
  let faulted = false
  let connections = 0
  const sockets = new Set<Socket>()
  const server: Server = createServer((client) => {
    connections += 1
    const upstream = connect(Number(target.port || 5432), target.hostname)
    sockets.add(client).add(upstream)
    client.on('error', () => upstream.destroy())
    upstream.on('error', () => client.destroy())
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
    upstream.on('data', (chunk) => client.write(chunk))
    let seen = ''
    client.on('data', (chunk) => {
      if (!faulted) {
        seen += chunk.toString('latin1')
        if (seen.includes(TYPES_QUERY)) {
          faulted = true
          if (fault === 'terminated') {
            // What pg_terminate_backend sends, then the socket closes.
            client.end(errorResponse('FATAL', '57P01', 'terminating connection due to administrator command'))
            upstream.destroy()
          } else {
            // A statement timeout: an error, then the connection is ready again.
            client.write(
              Buffer.concat([
                errorResponse('ERROR', '57014', 'canceling statement due to statement timeout'),
                READY_FOR_QUERY,
              ]),
            )
          }
          return
        }
        if (seen.length > 65_536) seen = seen.slice(-1024)
      }
      upstream.write(chunk)
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address() as { port: number }
  const url = new URL(TEST_DATABASE_URL)
  url.hostname = '127.0.0.1'
  url.port = String(port)
  return {
    url: url.toString(),
    get faulted() {
      return faulted
    },
    get connections() {
      return connections
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy()
        server.close(() => r())
      }),
  }
}

t.test('a connection cut while it fetches types reconnects, and its first query succeeds', async (t) => {
  const relay = await faultyRelay('terminated')
  t.teardown(relay.close)
  // openDatabase runs `select 1` on the first connection: with the fault, before the fix, it
  // failed with the cut socket's 57P01, and the fetch's rejection went unhandled.
  const db = await openDatabase({ kind: 'postgres', url: relay.url, maxConnections: 1 })
  t.teardown(() => db.close())
  t.ok(relay.faulted, 'the fetch was cut')
  t.equal(relay.connections, 2, 'the driver connected again')
  const [row] = await db.sql<{ n: number }[]>`select array_length(${['a', 'b', 'c']}::text[], 1) as n`
  t.equal(row?.n, 3, 'queries work on the new connection, array parameters too')
})

t.test('a type fetch that fails on a live connection fails its first query, and nothing else', async (t) => {
  const relay = await faultyRelay('cancelled')
  t.teardown(relay.close)
  await t.rejects(
    openDatabase({ kind: 'postgres', url: relay.url, maxConnections: 1 }),
    { code: '57014' },
    'the query that waited for the fetch gets its error',
  )
  t.ok(relay.faulted, 'the fetch failed')
  // The process is still here (tap fails the test on an unhandled rejection), and a pool on the
  // same relay works.
  const db = await openDatabase({ kind: 'postgres', url: relay.url, maxConnections: 1 })
  t.teardown(() => db.close())
  const [row] = await db.sql<{ one: number }[]>`select 1 as one`
  t.equal(row?.one, 1, 'a new pool works')
})
