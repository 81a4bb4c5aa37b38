import t from 'tap'
import { isPrivateHost } from '../../src/systems/private-upstream.js'

// Found in review: IPv6 forms that carry 127.0.0.1 (IPv4-compatible, SIIT, local-use NAT64, 6to4)
// were taken as public, and a cluster's Service names resolve to addresses no private range holds.
t.test('an IPv6 address that carries a private IPv4 one is private', async (t) => {
  for (const host of [
    '::ffff:127.0.0.1',
    '[::ffff:7f00:1]',
    '::7f00:1',
    '::8.8.8.8',
    '::ffff:0:7f00:1',
    '::ffff:0:10.0.0.1',
    '64:ff9b::127.0.0.1',
    '64:ff9b::a9fe:a9fe',
    '64:ff9b:1:1::7f00:1',
    '2002:7f00:1::',
    '2002:a9fe:a9fe::1',
    '2001:0:4136:e378:8000:63bf:3fff:fdd2',
    'fec0::1',
    'fe80::1%eth0',
    'fd00::1',
    '::1',
    '::',
  ])
    t.ok(isPrivateHost(host), host)
  for (const host of [
    '2606:4700::1111',
    '::ffff:8.8.8.8',
    '64:ff9b::8.8.8.8',
    '2002:808:808::1',
    '2a00:1450:4001::1',
  ])
    t.notOk(isPrivateHost(host), `${host} is public`)
})

t.test("a cluster's own names are private", async (t) => {
  for (const host of [
    'kubernetes.default.svc',
    'billing.prod.svc.cluster.local',
    'pod.cluster.local.',
    'X.NS.SVC',
  ])
    t.ok(isPrivateHost(host), host)
  for (const host of ['svc.example.com', 'example.cluster', 'api.stripe.com'])
    t.notOk(isPrivateHost(host), `${host} is not`)
})
