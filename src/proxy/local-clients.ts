import { BlockList, isIP } from 'node:net'

const LOOPBACK = new BlockList()
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4')
LOOPBACK.addAddress('::1', 'ipv6')

/**
 * Whether a connection reached the proxy at a loopback address: its own pod's (an agent through
 * HTTP_PROXY at 127.0.0.1, or redirected there by the enforce rules, which keep the pod's own
 * source address). One that reached it at the pod's IP came from another pod, which would act
 * as this proxy's tenant, with its upstream credentials. IPv4-mapped IPv6 is its IPv4 address.
 */
export function reachedAtLoopback(localAddress: string | undefined): boolean {
  if (!localAddress) return false
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(localAddress)
  const address = mapped ? (mapped[1] as string) : localAddress
  const family = isIP(address)
  return family !== 0 && LOOPBACK.check(address, family === 4 ? 'ipv4' : 'ipv6')
}
