import { lookup as dnsLookup, type LookupAddress } from 'node:dns'
import type { LookupFunction } from 'node:net'
import { isPrivateHost } from './private-upstream.js'

/** The code on the error a connection fails with when its upstream's name resolves inside. */
export const PRIVATE_ADDRESS_CODE = 'EPRIVATEADDRESS'

export class PrivateAddressRefused extends Error {
  readonly code = PRIVATE_ADDRESS_CODE
  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(`${host} resolves to ${address}, a loopback, private or link-local address`)
  }
}

/**
 * A `lookup` for net.connect and tls.connect that fails the connection when the name resolves to
 * any address `isPrivateHost` refuses. A system whose upstream was vetted as public at enrolment
 * (`publicOnly`) connects through it, so a DNS record changed since (rebinding: public when
 * enrolled, 169.254.169.254 or a cluster Service now) cannot take the injected credential
 * inside. Checked on the addresses the connection will use, not by a second lookup that could
 * answer differently. IP literals never reach a lookup; enrolment judged those.
 */
export function publicOnlyLookup(base: LookupFunction = dnsLookup as LookupFunction): LookupFunction {
  return (hostname, options, callback) => {
    base(hostname, { ...options, all: true }, (err, found, family) => {
      if (err) return callback(err, '', 0)
      const list: LookupAddress[] = Array.isArray(found)
        ? found
        : [{ address: found, family: family ?? (found.includes(':') ? 6 : 4) }]
      const inside = list.find((a) => isPrivateHost(a.address))
      if (inside) return callback(new PrivateAddressRefused(hostname, inside.address), '', 0)
      const first = list[0]
      if (!first) {
        const none: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`)
        none.code = 'ENOTFOUND'
        return callback(none, '', 0)
      }
      if (options.all) callback(null, list)
      else callback(null, first.address, first.family)
    })
  }
}
