import type { LookupAddress } from 'node:dns'
import type { LookupFunction } from 'node:net'
import t from 'tap'
import { PRIVATE_ADDRESS_CODE, publicOnlyLookup } from '../../src/systems/public-address-lookup.js'

/** A resolver that answers from a table, as getaddrinfo would (all addresses when asked for all). */
const table =
  (answers: Record<string, LookupAddress[]>): LookupFunction =>
  (hostname, options, callback) => {
    const found = answers[hostname]
    if (!found) return callback(Object.assign(new Error(`ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '')
    if (options.all) return callback(null, found)
    const first = found[0]!
    callback(null, first.address, first.family)
  }

const resolve = (lookup: LookupFunction, host: string, all: boolean) =>
  new Promise<{ err: NodeJS.ErrnoException | null; address: unknown; family?: number | undefined }>((done) =>
    lookup(host, { all }, (err, address, family) => done({ err, address, family })),
  )

const base = table({
  'public.example': [
    { address: '93.184.216.34', family: 4 },
    { address: '2606:2800:220:1::1', family: 6 },
  ],
  'metadata.example': [
    { address: '93.184.216.34', family: 4 },
    { address: '169.254.169.254', family: 4 },
  ],
  'mapped.example': [{ address: '::ffff:10.0.0.1', family: 6 }],
  'empty.example': [],
})

t.test('a public name resolves as it would without the rule, one address or all', async (t) => {
  const lookup = publicOnlyLookup(base)
  const one = await resolve(lookup, 'public.example', false)
  t.same([one.err, one.address, one.family], [null, '93.184.216.34', 4])
  const all = await resolve(lookup, 'public.example', true)
  t.same(all.address, [
    { address: '93.184.216.34', family: 4 },
    { address: '2606:2800:220:1::1', family: 6 },
  ])
})

t.test('a name with any private address among its answers is refused, whichever would be used', async (t) => {
  const lookup = publicOnlyLookup(base)
  for (const all of [false, true]) {
    const r = await resolve(lookup, 'metadata.example', all)
    t.equal(r.err?.code, PRIVATE_ADDRESS_CODE, `all: ${all}`)
    t.match(r.err?.message, /169\.254\.169\.254/)
  }
  const mapped = await resolve(lookup, 'mapped.example', false)
  t.equal(mapped.err?.code, PRIVATE_ADDRESS_CODE, 'an IPv4-mapped private address')
})

t.test("the resolver's own failures pass through; no address at all is ENOTFOUND", async (t) => {
  const lookup = publicOnlyLookup(base)
  t.equal((await resolve(lookup, 'nowhere.example', false)).err?.code, 'ENOTFOUND')
  t.equal((await resolve(lookup, 'empty.example', true)).err?.code, 'ENOTFOUND')
})
