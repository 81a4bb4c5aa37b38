import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })
}

/**
 * A private redis-server with AOF (appendfsync always), as the chart documents for zero
 * receipt loss, so a test can kill it and bring it back without touching the shared one.
 */
export class PrivateRedis {
  private child: ChildProcess | undefined
  readonly dir = mkdtempSync(join(tmpdir(), 'wg-redis-'))
  port = 0

  get url(): string {
    return `redis://127.0.0.1:${this.port}`
  }

  async start(): Promise<void> {
    if (!this.port) this.port = await freePort()
    this.child = spawn(
      'redis-server',
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--dir',
        this.dir,
        '--appendonly',
        'yes',
        '--appendfsync',
        'always',
        '--save',
        '',
      ],
      { stdio: 'ignore' },
    )
    const probe = new Redis(this.url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    })
    probe.on('error', () => {})
    for (let i = 0; i < 100; i++) {
      try {
        await probe.connect()
        await probe.ping()
        probe.disconnect()
        return
      } catch {
        await new Promise((r) => setTimeout(r, 50))
      }
    }
    probe.disconnect()
    throw new Error('private redis-server did not start')
  }

  /** SIGKILL: no clean shutdown, as in a crash. */
  async kill(): Promise<void> {
    const c = this.child
    if (!c || c.exitCode !== null) return
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve())
      c.kill('SIGKILL')
    })
  }
}
