import { isIP } from 'node:net'

/**
 * The rules the enforce init container installs in the pod's network namespace, so that no
 * container can reach an upstream except through gate-proxy:
 *
 * - nat: every outbound TCP connection is redirected to the proxy port, except the proxy's
 *   own (matched by its UID, as Istio's istio-init does), loopback, and operator-listed
 *   destinations;
 * - filter: outbound UDP is dropped except DNS to the pod's own nameservers, so HTTP/3 (QUIC),
 *   or anything else over UDP, cannot go around the proxy; and every other protocol a process's
 *   socket sends (ICMP echo from an unprivileged ping socket: a tunnel) is dropped too, the
 *   proxy's own and loopback excepted. What the kernel sends itself keeps flowing (ICMP
 *   replies and errors, IPv6 neighbour discovery: let through by type).
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
/** The pod's resolver list: kubelet writes it into every container, the init container's too. */
export const RESOLV_CONF = '/etc/resolv.conf'

/**
 * The rules for one address family, in two parts: the DNS exemptions go between them, one pair
 * per nameserver of the pod, known only inside the pod (its dnsPolicy and dnsConfig decide).
 */
function ruleParts(opts: IptablesOptions, family: IpFamily): { before: string[]; after: string[] } {
  const cidrs = opts.excludeOutboundCidrs.filter((c) => isIP(c.split('/')[0] ?? '') === family)
  const owner = `-m owner --uid-owner ${opts.proxyUid}`
  return {
    before: [
      '*nat',
      ':PREROUTING ACCEPT [0:0]',
      ':INPUT ACCEPT [0:0]',
      ':OUTPUT ACCEPT [0:0]',
      ':POSTROUTING ACCEPT [0:0]',
      `:${CHAIN} - [0:0]`,
      `-A OUTPUT -p tcp -j ${CHAIN}`,
      `-A ${CHAIN} ${owner} -j RETURN`,
      `-A ${CHAIN} -o lo -j RETURN`,
    ],
    // The DNS lines of both tables go here, nat's first: nat's are RETURNs from its chain, and the
    // filter table's are written after its own header (see dnsLines).
    after: [
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
      UDP_DNS_MARK,
      ...cidrs.map((c) => `-A ${UDP_CHAIN} -d ${c} -j RETURN`),
      `-A ${UDP_CHAIN} -j DROP`,
      // UDP back from its chain was let through there; TCP is nat's (redirected to the proxy).
      '-A OUTPUT -p udp -j ACCEPT',
      // The operator's excluded destinations, for every protocol (TCP's are nat's RETURNs).
      ...cidrs.map((c) => `-A OUTPUT -d ${c} -j ACCEPT`),
      ...(family === 6
        ? KERNEL_ICMP6.map((type) => `-A OUTPUT -p ipv6-icmp --icmpv6-type ${type} -j ACCEPT`)
        : [
            ...KERNEL_ICMP4.map((type) => `-A OUTPUT -p icmp --icmp-type ${type} -j ACCEPT`),
            // The kernel sends IGMP reports with no socket at all, so the owner rule below passes
            // them: dropped here, whoever joined.
            '-A OUTPUT -p igmp -j DROP',
          ]),
      `-A OUTPUT ! -p tcp ! -o lo -m owner --socket-exists ! --uid-owner ${opts.proxyUid} -j DROP`,
      'COMMIT',
    ],
  }
}

/**
 * ICMP the kernel sends itself (from sockets of its own, which the owner match cannot tell from a
 * process's): replies and errors, and IPv6's neighbour discovery, without which nothing reaches
 * the pod over IPv6. A process without NET_RAW (an enforced agent has none: it may not run as
 * root) cannot make the kernel send these with contents of its choosing; its ping socket sends
 * echo requests only. IGMP and MLD reports are dropped: a process chooses the group a join
 * reports (a few bytes to the pod's link per join, found in review), and neighbour discovery
 * works without them on a pod's veth.
 */
const KERNEL_ICMP4 = [0, 3, 11, 12] as const
const KERNEL_ICMP6 = [1, 2, 3, 4, 129, 133, 134, 135, 136] as const

/** Where the filter table's DNS exemptions go in `after` (never written out). */
const UDP_DNS_MARK = '#dns'

/** DNS over TCP (answers too large for UDP) to one nameserver: not sent to the proxy. */
function natDnsLine(address: string, family: IpFamily): string {
  return `-A ${CHAIN} -d ${address}/${family === 4 ? 32 : 128} -p tcp --dport 53 -j RETURN`
}
/** DNS over UDP to one nameserver: let through; UDP anywhere else is dropped. */
function udpDnsLine(address: string, family: IpFamily): string {
  return `-A ${UDP_CHAIN} -d ${address}/${family === 4 ? 32 : 128} -p udp --dport 53 -j RETURN`
}

/**
 * The iptables-restore input for one address family, given the pod's nameservers. Port 53 is
 * open only to them: to any other address it would be a UDP channel around the proxy (a VPN
 * listening on port 53 needs no DNS at all). Addresses of the other family are ignored.
 */
export function iptablesRestoreInput(
  opts: IptablesOptions,
  family: IpFamily,
  nameservers: readonly string[],
): string {
  const own = nameservers.filter((a) => isIP(a) === family)
  const { before, after } = ruleParts(opts, family)
  const udp = after.indexOf(UDP_DNS_MARK)
  const lines = [
    ...before,
    ...own.map((a) => natDnsLine(a, family)),
    ...after.slice(0, udp),
    ...own.map((a) => udpDnsLine(a, family)),
    ...after.slice(udp + 1),
  ]
  return `${lines.join('\n')}\n`
}

/**
 * Shell that reads the nameservers from resolv.conf and appends the rule lines for those of one
 * family to $nat and $udp. Only characters an address of the family can hold are accepted, so
 * nothing in the file can become a rule of its own; anything else (a zone-scoped fe80::1%eth0,
 * a typo) is skipped, and DNS to it is dropped.
 */
function readNameservers(resolvConf: string): string[] {
  const quoted = `'${resolvConf.replaceAll("'", "'\\''")}'`
  // Each line is appended with a literal \n, which printf '%b' turns into a newline.
  return [
    "nat4=''; udp4=''; nat6=''; udp6=''",
    `if [ -r ${quoted} ]; then`,
    '  while read -r word address rest || [ -n "$word" ]; do',
    '    [ "$word" = nameserver ] || continue',
    '    case "$address" in',
    `      ''|*[!0-9.]*) ;;`,
    `      *) nat4="$nat4${natDnsLine('$address', 4)}\\n"`,
    `         udp4="$udp4${udpDnsLine('$address', 4)}\\n" ;;`,
    '    esac',
    '    case "$address" in',
    '      *[!0-9A-Fa-f:.]*) ;;',
    `      *:*) nat6="$nat6${natDnsLine('$address', 6)}\\n"`,
    `           udp6="$udp6${udpDnsLine('$address', 6)}\\n" ;;`,
    '    esac',
    `  done < ${quoted}`,
    'fi',
  ]
}

/** One family's restore: the fixed rules as quoted here-documents, the DNS lines between them. */
function restore(command: string, opts: IptablesOptions, family: IpFamily): string[] {
  const { before, after } = ruleParts(opts, family)
  const udp = after.indexOf(UDP_DNS_MARK)
  const heredoc = (lines: string[]) => ["cat <<'RULES'", ...lines, 'RULES']
  return [
    '{',
    ...heredoc(before),
    `printf '%b' "$nat${family}"`,
    ...heredoc(after.slice(0, udp)),
    `printf '%b' "$udp${family}"`,
    ...heredoc(after.slice(udp + 1)),
    `} | ${command}`,
  ]
}

/**
 * The init container's shell script. IPv6 rules are installed when the pod has IPv6 at
 * all; a node without it has no IPv6 path to go around the proxy by. `resolvConf` is for tests.
 */
export function iptablesInitScript(opts: IptablesOptions, resolvConf = RESOLV_CONF): string {
  return [
    'set -eu',
    ...readNameservers(resolvConf),
    ...restore('iptables-restore', opts, 4),
    'if [ -e /proc/net/if_inet6 ]; then',
    ...restore('ip6tables-restore', opts, 6),
    'fi',
    '',
  ].join('\n')
}
