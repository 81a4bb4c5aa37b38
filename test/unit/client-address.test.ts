import t from 'tap'
import { clientOf } from '../../src/node-http/client-address.js'

t.test('a per-client limit counts an IPv4 address, or an IPv6 /64', async (t) => {
  t.equal(clientOf('198.51.100.7'), '198.51.100.7')
  t.equal(clientOf('2001:db8:1:2::1'), '2001:db8:1:2::/64')
  t.equal(clientOf('2001:0db8:0001:0002:ffff:ffff:ffff:ffff'), '2001:db8:1:2::/64', 'written long')
  t.equal(clientOf('2001:DB8:1:2::1'), '2001:db8:1:2::/64', 'upper case')
  t.equal(clientOf('2001:db8::1'), '2001:db8:0:0::/64', 'zeros compressed early')
  t.equal(clientOf('fe80::1%eth0'), 'fe80:0:0:0::/64', 'a zone is not part of it')
  t.equal(clientOf('::1'), '0:0:0:0::/64')
})

// Found in review: an address carrying an IPv4 one was miscounted, and NAT64 clients were one.
t.test('an IPv6 address that carries an IPv4 address is that IPv4 address', async (t) => {
  t.equal(clientOf('::ffff:198.51.100.7'), '198.51.100.7', 'mapped')
  t.equal(clientOf('::ffff:c633:6407'), '198.51.100.7', 'mapped, in hex')
  t.equal(clientOf('::198.51.100.7'), '198.51.100.7', 'compatible')
  t.equal(clientOf('64:ff9b::198.51.100.7'), '198.51.100.7', 'NAT64')
  t.equal(clientOf('64:ff9b::c633:6408'), '198.51.100.8', 'NAT64, in hex')
  t.equal(clientOf('1:2::3:4:5:1.2.3.4'), '1:2:0:3::/64', 'a dotted tail elsewhere is two groups')
})
