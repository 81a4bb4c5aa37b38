/** A minimal keep-alive upstream for the proxy benchmark: reads the body, answers 200 JSON. */
import { createServer } from 'node:http'

const server = createServer((req, res) => {
  req.resume()
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '11' })
    res.end('{"ok":true}')
  })
})
server.keepAliveTimeout = 65_000
server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`)
})
