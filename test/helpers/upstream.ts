import { createHash } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'

export interface Received {
  method: string
  url: string
  headers: IncomingMessage['headers']
  rawHeaders: string[]
  body: Buffer
  bodySha256: string
  complete: boolean
}

export type Behaviour = (req: IncomingMessage, res: ServerResponse, body: Buffer) => void | Promise<void>

/** A real upstream on loopback that records every request it receives. */
export class RecordingUpstream {
  readonly received: Received[] = []
  /** Requests whose headers arrived, their bodies complete or not. */
  arrivals = 0
  behaviour: Behaviour = (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end('{"ok":true}')
  }
  private server: Server | undefined
  port = 0

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      this.arrivals++
      const chunks: Buffer[] = []
      let complete = false
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        complete = true
        const body = Buffer.concat(chunks)
        this.received.push({
          method: req.method ?? '',
          url: req.url ?? '',
          headers: req.headers,
          rawHeaders: req.rawHeaders,
          body,
          bodySha256: createHash('sha256').update(body).digest('hex'),
          complete,
        })
        Promise.resolve(this.behaviour(req, res, body)).catch(() => res.destroy())
      })
      req.on('aborted', () => {
        if (!complete)
          this.received.push({
            method: req.method ?? '',
            url: req.url ?? '',
            headers: req.headers,
            rawHeaders: req.rawHeaders,
            body: Buffer.concat(chunks),
            bodySha256: '',
            complete: false,
          })
      })
    })
    await new Promise<void>((r) => this.server?.listen(0, '127.0.0.1', () => r()))
    const addr = this.server.address()
    this.port = typeof addr === 'object' && addr ? addr.port : 0
    return this
  }

  get origin(): string {
    return `http://127.0.0.1:${this.port}`
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections()
    await new Promise<void>((r) => this.server?.close(() => r()))
  }
}
