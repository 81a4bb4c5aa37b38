import t from 'tap'
import { iptablesInitScript, iptablesRestoreInput } from '../../src/injector/iptables-rules.js'

const base = { proxyUid: 1337, proxyPort: 15001, excludeOutboundCidrs: [], excludeOutboundPorts: [] }

t.test(
  'IPv4: all outbound TCP to the proxy, except the proxy itself and loopback; UDP only for DNS',
  async (t) => {
    t.equal(
      iptablesRestoreInput(base, 4),
      `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:WRITEGATE_OUTPUT - [0:0]
-A OUTPUT -p tcp -j WRITEGATE_OUTPUT
-A WRITEGATE_OUTPUT -m owner --uid-owner 1337 -j RETURN
-A WRITEGATE_OUTPUT -o lo -j RETURN
-A WRITEGATE_OUTPUT -p tcp -j REDIRECT --to-ports 15001
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:WRITEGATE_UDP - [0:0]
-A OUTPUT -p udp -j WRITEGATE_UDP
-A WRITEGATE_UDP -m owner --uid-owner 1337 -j RETURN
-A WRITEGATE_UDP -o lo -j RETURN
-A WRITEGATE_UDP -p udp --dport 53 -j RETURN
-A WRITEGATE_UDP -j DROP
COMMIT
`,
    )
  },
)

t.test('exclusions go before the redirect, each CIDR in its own family', async (t) => {
  const opts = {
    proxyUid: 1337,
    proxyPort: 15002,
    excludeOutboundCidrs: ['10.96.0.1/32', 'fd00::/8'],
    excludeOutboundPorts: [6443],
  }
  const v4 = iptablesRestoreInput(opts, 4)
  const v6 = iptablesRestoreInput(opts, 6)
  const natRules = (text: string) =>
    text
      .split('COMMIT')[0]
      ?.split('\n')
      .filter((l) => l.startsWith('-A')) ?? []
  t.same(natRules(v4), [
    '-A OUTPUT -p tcp -j WRITEGATE_OUTPUT',
    '-A WRITEGATE_OUTPUT -m owner --uid-owner 1337 -j RETURN',
    '-A WRITEGATE_OUTPUT -o lo -j RETURN',
    '-A WRITEGATE_OUTPUT -d 10.96.0.1/32 -j RETURN',
    '-A WRITEGATE_OUTPUT -p tcp --dport 6443 -j RETURN',
    '-A WRITEGATE_OUTPUT -p tcp -j REDIRECT --to-ports 15002',
  ])
  t.same(natRules(v6), [
    '-A OUTPUT -p tcp -j WRITEGATE_OUTPUT',
    '-A WRITEGATE_OUTPUT -m owner --uid-owner 1337 -j RETURN',
    '-A WRITEGATE_OUTPUT -o lo -j RETURN',
    '-A WRITEGATE_OUTPUT -d fd00::/8 -j RETURN',
    '-A WRITEGATE_OUTPUT -p tcp --dport 6443 -j RETURN',
    '-A WRITEGATE_OUTPUT -p tcp -j REDIRECT --to-ports 15002',
  ])
  t.match(v4, /-A WRITEGATE_UDP -d 10\.96\.0\.1\/32 -j RETURN\n-A WRITEGATE_UDP -j DROP/)
  t.notMatch(v4, /fd00/)
})

t.test('the init script restores both families, IPv6 only where the pod has it', async (t) => {
  const script = iptablesInitScript(base)
  const lines = script.split('\n')
  t.equal(lines[0], 'set -eu', 'any failed rule fails the init container, so the pod never starts ungated')
  t.equal(lines[1], "iptables-restore <<'RULES'")
  t.ok(script.includes(iptablesRestoreInput(base, 4)), 'the IPv4 rules verbatim')
  t.ok(script.includes(iptablesRestoreInput(base, 6)), 'the IPv6 rules verbatim')
  t.match(script, /if \[ -e \/proc\/net\/if_inet6 \]; then\nip6tables-restore <<'RULES'\n/)
  t.equal(script.match(/^RULES$/gm)?.length, 2, 'each here-document is closed')
})
