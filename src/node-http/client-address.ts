import { isIP } from 'node:net'

/** The eight groups of an IPv6 address, an embedded dotted IPv4 tail as its two groups. */
function groupsOf(address: string): number[] {
  let text = address
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text)
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number]
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head = '', tail] = text.split('::')
  const left = head ? head.split(':') : []
  const right = tail ? tail.split(':') : []
  const all =
    tail === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill('0'), ...right]
  return all.map((g) => Number.parseInt(g, 16))
}

/**
 * Who a per-client limit counts: an IPv4 address, or an IPv6 address's /64 (found in review:
 * one client holds a whole /64, and each of its addresses had a limit of its own). An IPv6
 * address that carries an IPv4 one (mapped, compatible, NAT64's 64:ff9b::/96) is that IPv4
 * address: clients behind a NAT64 gateway are not one client.
 */
export function clientOf(ip: string): string {
  const address = ip.replace(/%.*$/, '')
  if (isIP(address) !== 6) return address
  const g = groupsOf(address)
  const ipv4 = () => `${g[6]! >> 8}.${g[6]! & 255}.${g[7]! >> 8}.${g[7]! & 255}`
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0)
  if (zeros(0, 5) && (g[5] === 0xffff || (g[5] === 0 && (g[6] ?? 0) !== 0))) return ipv4()
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return ipv4()
  return `${g
    .slice(0, 4)
    .map((x) => x.toString(16))
    .join(':')}::/64`
}
