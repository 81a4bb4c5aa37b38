import { AsnConvert } from '@peculiar/asn1-schema'
import {
  GeneralName,
  GeneralSubtree,
  GeneralSubtrees,
  id_ce_nameConstraints,
  NameConstraints,
} from '@peculiar/asn1-x509'
import { Extension, type X509Certificate } from '@peculiar/x509'

/**
 * X.509 name constraints (RFC 5280 §4.2.1.10) for an interception CA: it may vouch only for the
 * tenant's enrolled upstream hosts (a DNS name permits itself and its subdomains), and for no
 * IP address at all (every IPv4 and IPv6 address is excluded: without that, a CA constrained
 * on DNS names alone could still sign for any address). Critical, so a client that cannot
 * read the extension refuses the CA rather than ignore it.
 */
export function nameConstraintsExtension(hosts: readonly string[]): Extension {
  const value = new NameConstraints({
    permittedSubtrees: new GeneralSubtrees(
      hosts.map((h) => new GeneralSubtree({ base: new GeneralName({ dNSName: h }) })),
    ),
    excludedSubtrees: new GeneralSubtrees(
      ['0.0.0.0/0', '::/0'].map((cidr) => new GeneralSubtree({ base: new GeneralName({ iPAddress: cidr }) })),
    ),
  })
  return new Extension(id_ce_nameConstraints, true, AsnConvert.serialize(value))
}

/** The DNS names a CA certificate's name constraints permit; null when it has none (unconstrained). */
export function permittedDnsNames(cert: X509Certificate): string[] | null {
  const ext = cert.getExtension(id_ce_nameConstraints)
  if (!ext) return null
  const nc = AsnConvert.parse(ext.value, NameConstraints)
  return (nc.permittedSubtrees ?? []).flatMap((s) => (s.base.dNSName ? [s.base.dNSName.toLowerCase()] : []))
}

/** Whether `host` (a DNS name) is inside one of `permitted`: the name itself or a subdomain of it. */
export function isPermitted(host: string, permitted: readonly string[]): boolean {
  const h = host.toLowerCase().replace(/\.$/, '')
  return permitted.some((p) => h === p || h.endsWith(`.${p}`))
}
