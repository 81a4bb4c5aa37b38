import t from 'tap'
import { clientOf } from '../../src/node-http/client-address.js'

t.test('a per-client limit counts an IPv4 address, or an IPv6 /64', async (t) => {
  t.equal(clientOf('198.51.100.7'), '198.51.100.7')
  t.equal(clientOf('::ffff:198.51.100.7'), '198.51.100.7', 'IPv4-mapped is the IPv4 address')
  t.equal(clientOf('2001:db8:1:2::1'), '2001:db8:1:2::/64')
  t.equal(clientOf('2001:0db8:0001:0002:ffff:ffff:ffff:ffff'), '2001:db8:1:2::/64', 'written long')
  t.equal(clientOf('2001:db8::1'), '2001:db8:0:0::/64', 'zeros compressed early')
  t.equal(clientOf('fe80::1%eth0'), 'fe80:0:0:0::/64', 'a zone is not part of it')
  t.equal(clientOf('::1'), '0:0:0:0::/64')
})
