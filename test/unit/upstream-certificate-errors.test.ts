import { execFileSync } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer as createHttpsServer, get } from 'node:https'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { certificateFailure } from '../../src/proxy/upstream-forwarding.js'

/**
 * Found in review: an upstream whose chain breaks a name constraint, a path length or a key usage
 * failed its handshake with a code the proxy did not know as a certificate's (Node gives
 * UNSPECIFIED to the verify errors it does not name), so the agent was told upstream_error,
 * which says the write may have been sent. Real chains, made with openssl, and the code Node
 * gives each handshake: the day Node names one another way, this fails.
 */
const EXTENSIONS = `
[constrained]
basicConstraints=critical,CA:TRUE
keyUsage=critical,keyCertSign,cRLSign
nameConstraints=critical,permitted;DNS:example.org
[no_sub_ca]
basicConstraints=critical,CA:TRUE,pathlen:0
keyUsage=critical,keyCertSign,cRLSign
[no_cert_sign]
basicConstraints=critical,CA:TRUE
keyUsage=critical,digitalSignature
[sub_ca]
basicConstraints=critical,CA:TRUE
keyUsage=critical,keyCertSign,cRLSign
[leaf]
basicConstraints=CA:FALSE
subjectAltName=DNS:localhost
`

t.test(
  'an upstream chain that does not verify is a certificate failure, whatever Node calls it',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'wg-chains-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    const file = (name: string) => join(dir, name)
    writeFileSync(file('ext.cnf'), EXTENSIONS)
    const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' })
    const key = (name: string) =>
      openssl('ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', file(name))
    const root = (name: string, section: string) => {
      key(`${name}.key`)
      // Extensions from our own file, not the system's default configuration.
      openssl(
        'req',
        '-x509',
        '-new',
        '-key',
        `${name}.key`,
        '-subj',
        `/CN=${name}`,
        '-days',
        '1',
        '-config',
        file('req.cnf'),
        '-extensions',
        section,
        '-out',
        `${name}.crt`,
      )
    }
    writeFileSync(file('req.cnf'), `[req]\ndistinguished_name=dn\n[dn]\n${EXTENSIONS}`)
    const issue = (name: string, by: string, section: string, subject: string) => {
      key(`${name}.key`)
      openssl(
        'req',
        '-new',
        '-key',
        `${name}.key`,
        '-subj',
        `/CN=${subject}`,
        '-config',
        file('req.cnf'),
        '-out',
        `${name}.csr`,
      )
      openssl(
        'x509',
        '-req',
        '-in',
        `${name}.csr`,
        '-CA',
        `${by}.crt`,
        '-CAkey',
        `${by}.key`,
        '-set_serial',
        String(Date.now()),
        '-days',
        '1',
        '-extfile',
        'ext.cnf',
        '-extensions',
        section,
        '-out',
        `${name}.crt`,
      )
    }
    const handshake = async (leaf: string, chain: string[], ca: string): Promise<string | undefined> => {
      const server = createHttpsServer(
        {
          key: readFileSync(file(`${leaf}.key`)),
          cert: [leaf, ...chain].map((c) => readFileSync(file(`${c}.crt`), 'utf8')).join(''),
        },
        (_req, res) => res.end('ok'),
      )
      server.listen(0, '127.0.0.1')
      await once(server, 'listening')
      try {
        return await new Promise((resolve) => {
          get(
            {
              host: '127.0.0.1',
              port: (server.address() as AddressInfo).port,
              servername: 'localhost',
              ca: readFileSync(file(`${ca}.crt`)),
            },
            (res) => {
              res.resume()
              resolve(undefined)
            },
          ).on('error', (err: NodeJS.ErrnoException) => resolve(err.code))
        })
      } finally {
        server.close()
      }
    }

    root('constrained', 'constrained')
    issue('leaf1', 'constrained', 'leaf', 'localhost')
    root('nosub', 'no_sub_ca')
    issue('inter', 'nosub', 'sub_ca', 'inter')
    issue('leaf2', 'inter', 'leaf', 'localhost')
    root('nosign', 'no_cert_sign')
    issue('leaf3', 'nosign', 'leaf', 'localhost')
    root('good', 'sub_ca')
    issue('leaf4', 'good', 'leaf', 'localhost')

    t.equal(await handshake('leaf4', [], 'good'), undefined, 'a chain that verifies is answered')
    for (const [what, leaf, chain, ca] of [
      ['a name constraint broken', 'leaf1', [], 'constrained'],
      ['a path length exceeded', 'leaf2', ['inter'], 'nosub'],
      ['an issuer not allowed to sign certificates', 'leaf3', [], 'nosign'],
      ['an issuer no one trusts', 'leaf4', [], 'constrained'],
    ] as const) {
      const code = await handshake(leaf, [...chain], ca)
      t.ok(code, `${what}: the handshake fails (${code})`)
      t.ok(certificateFailure(code), `${what}: ${code} is a certificate failure`)
    }
    for (const code of ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ERR_SSL_WRONG_VERSION_NUMBER', undefined])
      t.notOk(certificateFailure(code), `${code} is not`)
  },
)
