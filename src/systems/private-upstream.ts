import { BlockList, isIP } from 'node:net'

/**
 * Addresses an upstream may not have unless the installation allows private upstreams: an
 * admin who could enrol `http://169.254.169.254` or `http://127.0.0.1:5432` would have
 * writegate (holding injected credentials, inside the cluster) write to the cloud metadata
 * service or the control plane's own neighbours.
 */
const PRIVATE = new BlockList()
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  // Multicast, reserved and broadcast: no upstream of anyone's.
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  PRIVATE.addSubnet(net, bits, 'ipv4')
for (const [net, bits] of [
  ['::', 127],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const)
  PRIVATE.addSubnet(net, bits, 'ipv6')

/** Kubernetes's names for its Services and pods (`kubernetes.default.svc`, `x.ns.svc.cluster.local`). */
const CLUSTER_SUFFIXES = ['.svc', '.svc.cluster.local', '.cluster.local']

/** Whether a host (a name or an IP literal, brackets allowed) is loopback, private or link-local. */
export function isPrivateHost(host: string): boolean {
  // A fully qualified name's trailing dot names the same host (`localhost.` is localhost).
  const h = host
    .replace(/^\[|\]$/g, '')
    .toLowerCase()
    .replace(/\.$/, '')
  if (h === 'localhost' || h.endsWith('.localhost')) return true
  // A cluster's own names: its Services may have addresses no range here marks as private (GKE
  // gives new clusters 34.118.224.0/20 for them; found in review).
  if (CLUSTER_SUFFIXES.some((suffix) => h.endsWith(suffix))) return true
  const family = isIP(h)
  if (family === 4) return PRIVATE.check(h, 'ipv4')
  if (family === 6) return privateIpv6(h)
  return false
}

/**
 * An IPv6 address that carries an IPv4 one is judged as that address, or refused when where it
 * leads depends on the network (found in review: the IPv4-compatible, SIIT, 6to4 and local-use
 * NAT64 forms of 127.0.0.1 were taken as public): IPv4-mapped (::ffff:a.b.c.d), SIIT
 * (::ffff:0:a.b.c.d), NAT64's well-known prefix (64:ff9b::/96) and 6to4 (2002::/16, the address
 * in its second to fifth bytes) by their IPv4 address; IPv4-compatible (::/96), the rest of
 * 64:ff9b::/32 (the local-use 64:ff9b:1::/48 of RFC 8215 is a network's own), Teredo (2001::/32)
 * and the deprecated site-local fec0::/10, whatever they carry.
 */
function privateIpv6(address: string): boolean {
  const b = ipv6Bytes(address)
  const zero = (from: number, to: number) => b.slice(from, to).every((x) => x === 0)
  const v4 = (at: number) => PRIVATE.check(`${b[at]}.${b[at + 1]}.${b[at + 2]}.${b[at + 3]}`, 'ipv4')
  if (zero(0, 12)) return true
  if (zero(0, 10) && b[10] === 0xff && b[11] === 0xff) return v4(12)
  if (zero(0, 8) && b[8] === 0xff && b[9] === 0xff && zero(10, 12)) return v4(12)
  if (b[0] === 0 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b) return zero(4, 12) ? v4(12) : true
  if (b[0] === 0x20 && b[1] === 0x02) return v4(2)
  if (b[0] === 0x20 && b[1] === 0x01 && b[2] === 0 && b[3] === 0) return true
  if (b[0] === 0xfe && ((b[1] as number) & 0xc0) === 0xc0) return true
  return PRIVATE.check(address, 'ipv6')
}

/** The 16 bytes of an IPv6 address `isIP` accepted (a dotted IPv4 tail allowed, a zone dropped). */
function ipv6Bytes(address: string): number[] {
  let text = address.replace(/%.*$/, '')
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text)
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number]
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [left = '', right] = text.split('::')
  const words = (part: string) => (part === '' ? [] : part.split(':'))
  const head = words(left)
  const tail = right === undefined ? [] : words(right)
  const all = [...head, ...Array(8 - head.length - tail.length).fill('0'), ...tail]
  return all.flatMap((w) => {
    const n = Number.parseInt(w, 16)
    return [n >> 8, n & 255]
  })
}

/**
 * Whether a host name resolves, now, to an address `isPrivateHost` refuses: a name is no safer
 * than what it points at (`vm`, a cluster service, a record for 169.254.169.254). A name that
 * does not resolve (yet) passes; a record changed later (DNS rebinding) is caught when
 * connecting, by publicOnlyLookup.
 */
export async function resolvesPrivate(
  host: string,
  addressesOf: (host: string) => Promise<string[]>,
): Promise<string | null> {
  if (isIP(host.replace(/^\[|\]$/g, '')) !== 0) return null
  const addresses = await addressesOf(host).catch(() => [] as string[])
  return addresses.find((a) => isPrivateHost(a)) ?? null
}
