import { execFile, spawn } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'

const root = join(import.meta.dirname, '..', '..')

interface Listening {
  address: string
  proxyPort: number
  metricsPort: number
}

function curl(args: string[]): Promise<{ code: number; stderr: string; stdout: string }> {
  return new Promise((resolve) => {
    execFile('curl', ['-sS', '--max-time', '10', ...args], { encoding: 'utf8' }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? -1) : 0, stdout, stderr }),
    )
  })
}

/**
 * The exact crash of issue 14, on the real `writegate start` (the single-process default: API,
 * gate-proxy and metrics in one process): curl asks the proxy for a CONNECT tunnel to a host
 * it refuses, gets its 403, and hangs up with bytes unread. Node then reported ECONNRESET on a
 * socket with no 'error' listener, and the process died, control plane and all. So did the
 * TLS and HTTP/2 openings real clients send to a plain-HTTP port, if they reset.
 */
t.test('curl cannot take `writegate start` down', async (t) => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'start'], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      WRITEGATE_CONFIG: join(root, 'config', 'writegate.yaml'),
      WRITEGATE_DATABASE_URL: 'memory://',
      WRITEGATE_DATA_DIR: mkdtempSync(join(tmpdir(), 'wg-hostile-')),
      WRITEGATE_HOST: '127.0.0.1',
      WRITEGATE_PROXY_HOST: '127.0.0.1',
      WRITEGATE_PORT: '0',
      WRITEGATE_PROXY_PORT: '0',
      WRITEGATE_METRICS_PORT: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stderr.on('data', (d) => {
    stderr += d
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  t.teardown(async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM')
      await exited
    }
  })
  const listening = await new Promise<Listening>((resolve, reject) => {
    child.stdout.on('data', (d) => {
      stdout += d
      const line = stdout.split('\n').find((l) => l.includes('writegate control plane listening'))
      if (line) resolve(JSON.parse(line) as Listening)
    })
    void exited.then((code) => reject(new Error(`writegate start exited (${code}): ${stderr}`)))
  })
  const api = listening.address
  const proxy = `http://127.0.0.1:${listening.proxyPort}`

  for (let i = 0; i < 3; i++) {
    const refused = await curl(['-p', '-x', proxy, 'https://127.0.0.1:18081/'])
    t.equal(refused.code, 56, 'curl: the CONNECT failed')
    t.match(refused.stderr, /CONNECT tunnel failed, response 403/)
  }
  // Real clients' openings on plain-HTTP ports: TLS, and HTTP/2 with prior knowledge.
  for (const url of [api.replace('http:', 'https:'), `https://127.0.0.1:${listening.proxyPort}/`])
    t.not((await curl(['-k', url])).code, 0, `TLS to ${url} fails`)
  const h2 = await curl(['--http2-prior-knowledge', `${api}/healthz`])
  t.not(h2.code, 0, 'HTTP/2 with prior knowledge fails')

  // Every port still serves: the process lived through it all.
  t.match((await curl([`${api}/healthz`])).stdout, '{"ok":true}', 'the API serves')
  t.match((await curl([`${proxy}/healthz`])).stdout, '{"ok":true}', 'the proxy serves')
  t.match(
    (await curl([`http://127.0.0.1:${listening.metricsPort}/metrics`])).stdout,
    /writegate_/,
    'metrics serve',
  )
  t.equal(child.exitCode, null, 'writegate start is still running')
  t.notMatch(stderr, /Unhandled|ECONNRESET/, 'nothing unhandled on stderr')
})
