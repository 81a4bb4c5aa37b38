import { spawnSync } from 'node:child_process'
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { iptablesInitScript, iptablesRestoreInput } from '../../src/injector/iptables-rules.js'

const base = { proxyUid: 1337, proxyPort: 15001, excludeOutboundCidrs: [], excludeOutboundPorts: [] }

t.test(
  "IPv4: all outbound TCP to the proxy, except the proxy itself and loopback; UDP only for DNS to the pod's nameservers",
  async (t) => {
    t.equal(
      iptablesRestoreInput(base, 4, ['10.96.0.10', 'fd00::a']),
      `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:WRITEGATE_OUTPUT - [0:0]
-A OUTPUT -p tcp -j WRITEGATE_OUTPUT
-A WRITEGATE_OUTPUT -m owner --uid-owner 1337 -j RETURN
-A WRITEGATE_OUTPUT -o lo -j RETURN
-A WRITEGATE_OUTPUT -d 10.96.0.10/32 -p tcp --dport 53 -j RETURN
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
-A WRITEGATE_UDP -d 10.96.0.10/32 -p udp --dport 53 -j RETURN
-A WRITEGATE_UDP -j DROP
-A OUTPUT -p udp -j ACCEPT
-A OUTPUT -p icmp --icmp-type 0 -j ACCEPT
-A OUTPUT -p icmp --icmp-type 3 -j ACCEPT
-A OUTPUT -p icmp --icmp-type 11 -j ACCEPT
-A OUTPUT -p icmp --icmp-type 12 -j ACCEPT
-A OUTPUT -p igmp -j DROP
-A OUTPUT ! -p tcp ! -o lo -m owner --socket-exists ! --uid-owner 1337 -j DROP
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
  const v4 = iptablesRestoreInput(opts, 4, [])
  const v6 = iptablesRestoreInput(opts, 6, [])
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

t.test('no nameserver, no DNS: UDP port 53 is dropped like any other', async (t) => {
  const v4 = iptablesRestoreInput(base, 4, [])
  t.notMatch(v4, /--dport 53/)
  t.match(v4, /-A WRITEGATE_UDP -o lo -j RETURN\n-A WRITEGATE_UDP -j DROP\n/)
})

/**
 * Runs the init script with real sh, iptables-restore and ip6tables-restore replaced by
 * programs that keep their input, and the pod's resolv.conf replaced by `resolvConf`.
 */
function runInitScript(resolvConf: string | null) {
  const dir = mkdtempSync(join(tmpdir(), 'wg-iptables-'))
  for (const [command, out] of [
    ['iptables-restore', 'v4'],
    ['ip6tables-restore', 'v6'],
  ] as const) {
    writeFileSync(join(dir, command), `#!/bin/sh\ncat > '${join(dir, out)}'\n`)
    chmodSync(join(dir, command), 0o755)
  }
  const file = join(dir, 'resolv.conf')
  if (resolvConf !== null) writeFileSync(file, resolvConf)
  const run = spawnSync('sh', ['-c', iptablesInitScript(base, file)], {
    env: { PATH: `${dir}:${process.env.PATH ?? ''}` },
    encoding: 'utf8',
  })
  const read = (name: string) => (existsSync(join(dir, name)) ? readFileSync(join(dir, name), 'utf8') : null)
  return { status: run.status, stderr: run.stderr, v4: read('v4'), v6: read('v6') }
}

t.test(
  "the init script opens DNS to the nameservers in the pod's resolv.conf, and nothing else",
  async (t) => {
    const r = runInitScript(
      [
        '# written by kubelet',
        'search agents.svc.cluster.local svc.cluster.local cluster.local',
        'nameserver 10.96.0.10',
        'nameserver fd00::a',
        '  nameserver 10.96.0.11',
        'nameserver 1.2.3.4;touch /tmp/wg-owned',
        'nameserver $(touch /tmp/wg-owned)',
        'nameserver fe80::1%eth0',
        'nameserver',
        'options ndots:5',
        'nameserver 10.0.0.2',
      ].join('\n'), // no newline after the last line
    )
    t.equal(r.status, 0, r.stderr)
    t.equal(r.v4, iptablesRestoreInput(base, 4, ['10.96.0.10', '10.96.0.11', '10.0.0.2']))
    t.notOk(existsSync('/tmp/wg-owned'), 'nothing in the file runs')
    if (existsSync('/proc/net/if_inet6')) t.equal(r.v6, iptablesRestoreInput(base, 6, ['fd00::a']))
    else t.equal(r.v6, null, 'no IPv6 on this machine: no IPv6 rules')
  },
)

t.test('without a readable resolv.conf the script installs the rules with no DNS exemption', async (t) => {
  const r = runInitScript(null)
  t.equal(r.status, 0, r.stderr)
  t.equal(r.v4, iptablesRestoreInput(base, 4, []))
})

t.test('the init script restores both families, IPv6 only where the pod has it', async (t) => {
  const script = iptablesInitScript(base)
  const lines = script.split('\n')
  t.equal(lines[0], 'set -eu', 'any failed rule fails the init container, so the pod never starts ungated')
  t.match(script, /done < '\/etc\/resolv\.conf'\n/, "the pod's own resolv.conf")
  t.match(script, /\} \| iptables-restore\n/)
  t.match(script, /if \[ -e \/proc\/net\/if_inet6 \]; then\n\{\n[\s\S]*\} \| ip6tables-restore\nfi\n$/)
  t.equal(script.match(/^cat <<'RULES'$/gm)?.length, 6, 'three fixed parts per family')
  t.equal(script.match(/^RULES$/gm)?.length, 6, 'each here-document is closed')
})
