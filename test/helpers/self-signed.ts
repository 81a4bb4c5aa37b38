import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** A throwaway self-signed EC serving certificate for localhost, made with openssl, valid one day. */
export function selfSigned(name: string): { cert: string; key: string; pem: string } {
  const dir = mkdtempSync(join(tmpdir(), 'wg-cert-'))
  const cert = join(dir, `${name}.crt`)
  const key = join(dir, `${name}.key`)
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-subj',
      `/CN=${name}`,
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { stdio: 'pipe' },
  )
  return { cert, key, pem: readFileSync(cert, 'utf8') }
}
