import { isIP } from 'node:net'

/**
 * Who a per-client limit counts: an IPv4 address, or an IPv6 address's /64 (found in review:
 * one client holds a whole /64, and each of its addresses had a limit of its own). IPv4-mapped
 * IPv6 is its IPv4 address.
 */
export function clientOf(ip: string): string {
  const address = ip.replace(/%.*$/, '')
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  if (mapped) return mapped[1] as string
  if (isIP(address) !== 6) return address
  const [head = '', tail] = address.split('::')
  const left = head ? head.split(':') : []
  const right = tail ? tail.split(':') : []
  const groups =
    tail === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill('0'), ...right]
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':')}::/64`
}
