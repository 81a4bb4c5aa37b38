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

/** Whether a host (a name or an IP literal, brackets allowed) is loopback, private or link-local. */
export function isPrivateHost(host: string): boolean {
  // A fully qualified name's trailing dot names the same host (`localhost.` is localhost).
  const h = host
    .replace(/^\[|\]$/g, '')
    .toLowerCase()
    .replace(/\.$/, '')
  if (h === 'localhost' || h.endsWith('.localhost')) return true
  const family = isIP(h)
  if (family === 4) return PRIVATE.check(h, 'ipv4')
  if (family === 6) {
    // An IPv4 address written as IPv6 (::ffff:10.0.0.1), or behind NAT64 (64:ff9b::10.0.0.1), is
    // that IPv4 address.
    const embedded = /^(?:::ffff|64:ff9b:|64:ff9b:1:):(\d+\.\d+\.\d+\.\d+)$/.exec(h)
    if (embedded) return PRIVATE.check(embedded[1] as string, 'ipv4')
    // The well-known prefix and the local-use one (64:ff9b:1::/48), the IPv4 address last.
    const nat64 = /^64:ff9b(?::1)?::([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(h)
    if (nat64) {
      const hi = Number.parseInt(nat64[1] as string, 16)
      const lo = Number.parseInt(nat64[2] as string, 16)
      return PRIVATE.check(`${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`, 'ipv4')
    }
    return PRIVATE.check(h, 'ipv6')
  }
  return false
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
