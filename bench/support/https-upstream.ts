/**
 * The TLS benchmark's upstream: a keep-alive HTTPS server on 127.0.0.1 as `localhost`, with a
 * certificate from a CA of its own, written to the file named by the first argument (what the
 * system's caBundle and the bare proxy trust). Answers every request 200 JSON.
 */
import { webcrypto } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { createServer } from 'node:https'
import { createInterceptionCa, loadInterceptionCa, pemOfKey } from '../../src/tls/interception-ca.js'

const made = await createInterceptionCa({ hosts: ['localhost'], days: 1, name: 'bench upstream CA' })
const ca = await loadInterceptionCa(made.certPem, made.keyPem)
const keys = (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
  'sign',
  'verify',
])) as webcrypto.CryptoKeyPair
const cert = await ca.issueLeaf('localhost', keys, 3600)
writeFileSync(process.argv[2] as string, made.certPem)
const server = createServer(
  { key: await pemOfKey(keys.privateKey), cert: `${cert.trimEnd()}\n${made.certPem}` },
  (req, res) => {
    req.resume()
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '11' }).end('{"ok":true}')
    })
  },
)
server.keepAliveTimeout = 65_000
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`)
})
process.on('SIGTERM', () => process.exit(0))
