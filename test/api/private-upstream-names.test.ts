import t from 'tap'
import { startControlPlane } from '../helpers/control-plane.js'

/**
 * A name is no safer than what it points at: with private upstreams not allowed, an admin
 * cannot enrol a name that resolves to a loopback, private or metadata address, nor spell one
 * that is (a trailing dot, NAT64, multicast).
 */
const DNS: Record<string, string[]> = {
  'internal.example.com': ['10.0.0.7'],
  'metadata.example.com': ['93.184.216.34', '169.254.169.254'],
  'public.example.com': ['93.184.216.34', '2606:2800:220:1::1'],
}

t.test('upstream names are judged by what they resolve to', async (t) => {
  const looked: string[] = []
  const { api } = await startControlPlane(t, 'fake', {
    settings: { systems: { allowPrivateUpstreams: false } },
    addressesOf: async (host) => {
      looked.push(host)
      const found = DNS[host]
      if (!found) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' })
      return found
    },
  })
  const o = await api.newTenant()
  const enrol = (n: number, upstream: string) =>
    api.post(
      '/v1/systems',
      { systemId: `sys_n${n}`, upstream, routes: [{ method: 'POST', path: '/v1/x', verb: 'verify' }] },
      { bearer: o.apiKey },
    )
  const refused: [string, RegExp][] = [
    ['http://internal.example.com', /internal\.example\.com resolves to 10\.0\.0\.7/],
    ['https://metadata.example.com', /resolves to 169\.254\.169\.254/],
    ['http://localhost.:8080', /loopback/],
    ['http://[64:ff9b::7f00:1]', /loopback/],
    ['http://[64:ff9b::10.1.2.3]', /loopback/],
    ['http://[64:ff9b:1::a9fe:a9fe]', /loopback/],
    ['http://224.0.0.251', /loopback/],
    ['http://[ff02::1]', /loopback/],
  ]
  let n = 0
  for (const [upstream, error] of refused) {
    const r = await enrol(n++, upstream)
    t.same([r.status, r.body.code], [400, 'private_upstream'], upstream)
    t.match(r.body.error, error)
  }
  t.equal((await enrol(n++, 'https://public.example.com')).status, 201, 'a public name is enrolled')
  t.equal(
    (await enrol(n++, 'https://not-yet.example.com')).status,
    201,
    'a name that does not resolve yet too',
  )
  t.ok(looked.includes('public.example.com'), 'names were looked up')
  // Changing a system's upstream is judged the same way.
  const moved = await api.put(
    '/v1/systems/sys_n7',
    { upstream: 'http://internal.example.com', routes: [{ method: 'POST', path: '/v1/x', verb: 'verify' }] },
    { bearer: o.apiKey },
  )
  t.same([moved.status, moved.body.code], [400, 'private_upstream'], 'nor moved to one')
})
