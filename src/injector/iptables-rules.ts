import { isIP } from 'node:net'

/**
 * The rules the enforce init container installs in the pod's network namespace, so that no
 * container can reach an upstream except through gate-proxy:
 *
 * - nat: every outbound TCP connection is redirected to the proxy port, except the proxy's
 *   own (matched by its UID, as Istio's istio-init does), loopback, and operator-listed
 *   destinations;
 * - filter: outbound UDP is dropped except DNS, so HTTP/3 (QUIC) cannot go around the proxy.
 *
 * They are written as iptables-restore input: each table is replaced atomically, so a
 * restarted init container installs the same rules again instead of appending duplicates.
 */

export interface IptablesOptions {
  proxyUid: number
  proxyPort: number
  /** HTTPS interception's TLS port: outbound TCP to 443 goes there (the SNI names the host). */
  tlsPort?: number | undefined
  excludeOutboundCidrs: readonly string[]
  excludeOutboundPorts: readonly number[]
}

export type IpFamily = 4 | 6

const CHAIN = 'WRITEGATE_OUTPUT'
const UDP_CHAIN = 'WRITEGATE_UDP'

/** The iptables-restore input for one address family. */
export function iptablesRestoreInput(opts: IptablesOptions, family: IpFamily): string {
  const cidrs = opts.excludeOutboundCidrs.filter((c) => isIP(c.split('/')[0] ?? '') === family)
  const owner = `-m owner --uid-owner ${opts.proxyUid}`
  const lines = [
    '*nat',
    ':PREROUTING ACCEPT [0:0]',
    ':INPUT ACCEPT [0:0]',
    ':OUTPUT ACCEPT [0:0]',
    ':POSTROUTING ACCEPT [0:0]',
    `:${CHAIN} - [0:0]`,
    `-A OUTPUT -p tcp -j ${CHAIN}`,
    `-A ${CHAIN} ${owner} -j RETURN`,
    `-A ${CHAIN} -o lo -j RETURN`,
    ...cidrs.map((c) => `-A ${CHAIN} -d ${c} -j RETURN`),
    ...opts.excludeOutboundPorts.map((p) => `-A ${CHAIN} -p tcp --dport ${p} -j RETURN`),
    ...(opts.tlsPort === undefined
      ? []
      : [`-A ${CHAIN} -p tcp --dport 443 -j REDIRECT --to-ports ${opts.tlsPort}`]),
    `-A ${CHAIN} -p tcp -j REDIRECT --to-ports ${opts.proxyPort}`,
    'COMMIT',
    '*filter',
    ':INPUT ACCEPT [0:0]',
    ':FORWARD ACCEPT [0:0]',
    ':OUTPUT ACCEPT [0:0]',
    `:${UDP_CHAIN} - [0:0]`,
    `-A OUTPUT -p udp -j ${UDP_CHAIN}`,
    `-A ${UDP_CHAIN} ${owner} -j RETURN`,
    `-A ${UDP_CHAIN} -o lo -j RETURN`,
    `-A ${UDP_CHAIN} -p udp --dport 53 -j RETURN`,
    ...cidrs.map((c) => `-A ${UDP_CHAIN} -d ${c} -j RETURN`),
    `-A ${UDP_CHAIN} -j DROP`,
    'COMMIT',
  ]
  return `${lines.join('\n')}\n`
}

/**
 * The init container's shell script. IPv6 rules are installed when the pod has IPv6 at
 * all; a node without it has no IPv6 path to go around the proxy by.
 */
export function iptablesInitScript(opts: IptablesOptions): string {
  return [
    'set -eu',
    "iptables-restore <<'RULES'",
    iptablesRestoreInput(opts, 4).trimEnd(),
    'RULES',
    'if [ -e /proc/net/if_inet6 ]; then',
    "ip6tables-restore <<'RULES'",
    iptablesRestoreInput(opts, 6).trimEnd(),
    'RULES',
    'fi',
    '',
  ].join('\n')
}
