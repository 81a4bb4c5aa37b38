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
] as const)
  PRIVATE.addSubnet(net, bits, 'ipv4')
for (const [net, bits] of [
  ['::', 127],
  ['fc00::', 7],
  ['fe80::', 10],
] as const)
  PRIVATE.addSubnet(net, bits, 'ipv6')

/** Whether a host (a name or an IP literal, brackets allowed) is loopback, private or link-local. */
export function isPrivateHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase()
  if (h === 'localhost' || h.endsWith('.localhost')) return true
  const family = isIP(h)
  if (family === 4) return PRIVATE.check(h, 'ipv4')
  if (family === 6) {
    // An IPv4 address written as IPv6 (::ffff:10.0.0.1) is that IPv4 address.
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(h)
    if (mapped) return PRIVATE.check(mapped[1] as string, 'ipv4')
    return PRIVATE.check(h, 'ipv6')
  }
  return false
}
