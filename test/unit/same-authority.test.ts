import t from 'tap'
import { sameAuthority } from '../../src/proxy/same-authority.js'

t.test('a Host header names the tunnel host and port, or it is misdirected', async (t) => {
  const at443 = { host: 'api.example.com', port: 443 }
  const at8443 = { host: 'api.example.com', port: 8443 }
  const anyPort = { host: 'api.example.com', port: null }
  t.equal(sameAuthority('api.example.com', at443), true, 'no port means 443')
  t.equal(sameAuthority('API.Example.COM:443', at443), true, 'case-insensitive')
  t.equal(sameAuthority('api.example.com:8443', at8443), true)
  t.equal(sameAuthority('api.example.com:08443', at8443), true, 'a port is a number')
  t.equal(sameAuthority('api.example.com', at8443), false, 'no port is 443, not 8443')
  t.equal(sameAuthority('api.example.com:443', at8443), false)
  t.equal(sameAuthority('api.example.com:9', anyPort), true, 'the port is not known (transparent mode)')
  t.equal(sameAuthority('api.example.com', anyPort), true)
  for (const bad of [
    'api.example.com.evil.net',
    'api.example.comx',
    'api.example.com:',
    'api.example.com:443x',
    'api.example.com: 443',
    'evil.net',
    'x.api.example.com',
    '',
  ])
    t.equal(sameAuthority(bad, anyPort), false, `refused: ${JSON.stringify(bad)}`)
  t.equal(sameAuthority(undefined, at443), false, 'no Host header')
})

t.test('an IPv6 literal host is bracketed in the Host header; its colons are not a port', async (t) => {
  t.equal(sameAuthority('::1', { host: '::1', port: null }), false)
  t.equal(sameAuthority('2001:db8::1:5', { host: '2001:db8::1:5', port: null }), false)
  t.equal(sameAuthority('[::1]', { host: '::1', port: 443 }), true)
  t.equal(sameAuthority('[::1]:8443', { host: '::1', port: 8443 }), true)
  t.equal(sameAuthority('[::1]:8443', { host: '::1', port: 443 }), false)
})
