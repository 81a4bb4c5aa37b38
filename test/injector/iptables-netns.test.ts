import { spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { iptablesInitScript } from '../../src/injector/iptables-rules.js'

/**
 * The enforce init container's script, run for real: iptables-restore and ip6tables-restore in a
 * network namespace of its own (unshare -n, a veth pair for a way out), then probed from inside
 * by netns-probe.py as the agent (UID 1000) and as the proxy (UID 1337). Needs root; .ci/run
 * installs Debian's iptables. Found in review: ICMP echo from an unprivileged ping socket went
 * out of an enforced pod, a tunnel around the proxy.
 */
const PROXY_PORT = 15001
const NAMESERVER = '10.99.0.53'
const NEEDED = ['unshare', 'ip', 'iptables-restore', 'ip6tables-restore', 'python3', 'sysctl']

const root = process.getuid?.() === 0
t.test(
  'in a network namespace, the enforce rules leave the agent only the proxy and DNS',
  { skip: root ? false : 'needs root to make a network namespace' },
  async (t) => {
    const missing = NEEDED.filter((c) => spawnSync('sh', ['-c', `command -v ${c}`]).status !== 0)
    t.same(missing, [], 'the commands it needs (Debian: iptables, iproute2, util-linux, python3)')
    if (missing.length > 0) return
    const dir = mkdtempSync(join(tmpdir(), 'wg-netns-'))
    const resolvConf = join(dir, 'resolv.conf')
    writeFileSync(resolvConf, `nameserver ${NAMESERVER}\n`)
    const init = iptablesInitScript(
      { proxyUid: 1337, proxyPort: PROXY_PORT, excludeOutboundCidrs: [], excludeOutboundPorts: [] },
      resolvConf,
    )
    writeFileSync(join(dir, 'init.sh'), init)
    const setup = [
      'set -eu',
      'ip link set lo up',
      'ip link add d0 type veth peer name d1',
      'ip link set d1 up',
      'ip link set d0 up',
      'ip addr add 10.99.0.1/24 dev d0',
      'ip -6 addr add fd99::1/64 dev d0 nodad',
      // Known neighbours, so what the rules let out leaves at once (and is seen at d1).
      // Not /sys/class/net: sysfs is still the host's in a new network namespace.
      "mac=$(ip -o link show d1 | sed -n 's|.*link/ether \\([0-9a-f:]*\\).*|\\1|p')",
      `for a in 10.99.0.2 ${NAMESERVER}; do ip neigh add $a lladdr $mac dev d0 nud permanent; done`,
      'ip -6 neigh add fd99::2 lladdr $mac dev d0 nud permanent',
      // Unprivileged ping sockets, as containerd allows pods by default.
      'sysctl -q -w net.ipv4.ping_group_range="0 2147483647"',
      `sh ${join(dir, 'init.sh')}`,
      `python3 ${join(import.meta.dirname, 'netns-probe.py')} ${PROXY_PORT} ${NAMESERVER}`,
    ].join('\n')
    const run = spawnSync('unshare', ['-n', 'sh', '-c', setup], { encoding: 'utf8', timeout: 30_000 })
    t.equal(run.status, 0, run.stderr)
    const got = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}')
    t.match(
      got,
      { agent_tcp: 'connected', redirected_to_proxy_port: true },
      "the agent's TCP reaches the proxy port",
    )
    t.same(
      got.on_the_wire,
      ['agent-dns', 'proxy-icmp', 'proxy-icmp6', 'proxy-udp', 'proxy-udp6'],
      "what left the pod: the agent's DNS and the proxy's own traffic, nothing else of the agent's",
    )
    t.match(
      got,
      { agent_udp: 'refused', agent_icmp: 'refused' },
      'IPv4 refusals reach the sender (IPv6 ones are dropped silently)',
    )
    t.ok(got.neighbour_solicitations > 0, 'IPv6 neighbour discovery still leaves')
    t.equal(got.agent_joins, 'joined')
    t.equal(
      got.multicast_reports,
      0,
      'no IGMP or MLD report: the groups an agent joins carry bytes of its choosing',
    )
  },
)
