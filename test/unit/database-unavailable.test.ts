import t from 'tap'
import { isDatabaseUnavailable } from '../../src/store/postgres/database-unavailable.js'

/** A PostgresError as the driver builds it: the server's fields copied onto an Error. */
function postgresError(code: string): Error {
  const e = new Error('from the server')
  e.name = 'PostgresError'
  return Object.assign(e, { code, severity: 'FATAL' })
}

/** A socket error as the driver hands it to a waiting query (queryError adds `query`). */
function socketErrorOfQuery(code: string): Error {
  return Object.defineProperty(Object.assign(new Error(code), { code }), 'query', { value: 'select 1' })
}

t.test('a connection the database dropped or refused is unavailability', async (t) => {
  for (const code of ['CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'CONNECT_TIMEOUT'])
    t.ok(isDatabaseUnavailable(Object.assign(new Error(code), { code })), code)
  for (const code of ['57P01', '57P02', '57P03', '53300', '25006', '25P03', '08006', '08001'])
    t.ok(isDatabaseUnavailable(postgresError(code)), `SQLSTATE ${code}`)
  for (const code of ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT'])
    t.ok(isDatabaseUnavailable(socketErrorOfQuery(code)), `${code} handed to a query`)
})

t.test('anything else stays what it is', async (t) => {
  for (const code of ['23505', '42P01', '22P02', '40001', '08P01'])
    t.notOk(isDatabaseUnavailable(postgresError(code)), `SQLSTATE ${code} is not an outage`)
  t.notOk(
    isDatabaseUnavailable(Object.assign(new Error('x'), { code: '57P01' })),
    'a SQLSTATE-like code on another error',
  )
  t.notOk(
    isDatabaseUnavailable(Object.assign(new Error('upstream'), { code: 'ECONNREFUSED' })),
    "an upstream's socket error, not the database's",
  )
  for (const v of [null, undefined, 'CONNECTION_CLOSED', 42, {}]) t.notOk(isDatabaseUnavailable(v))
})
