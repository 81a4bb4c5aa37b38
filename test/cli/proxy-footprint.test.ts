import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import t from 'tap'
import { ROOT } from '../helpers/cli.js'

/**
 * Issue 19 (footprint): `writegate proxy` loads the proxy and nothing of the control plane.
 * Every module a command's entry imports is recorded by a resolve hook in a fresh process; the
 * proxy's must not reach fastify, the database drivers, the portal or the X.509 library (which
 * it loads only with an interception CA). The control plane's entry is the control: it does.
 */
function modulesLoadedBy(entry: string): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'wg-graph-'))
  const out = join(dir, 'loaded.txt')
  writeFileSync(out, '')
  const hooks = join(dir, 'hooks.mjs')
  writeFileSync(
    hooks,
    `import { appendFileSync } from 'node:fs'
let out
export function initialize(data) { out = data.out }
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context)
  appendFileSync(out, r.url + '\\n')
  return r
}
`,
  )
  const register = join(dir, 'register.mjs')
  writeFileSync(
    register,
    `import { register } from 'node:module'
register(${JSON.stringify(pathToFileURL(hooks).href)}, { data: { out: ${JSON.stringify(out)} } })
`,
  )
  const script = `await import(${JSON.stringify(pathToFileURL(join(ROOT, entry)).href)})`
  return new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      ['--import', 'tsx', '--import', pathToFileURL(register).href, '--input-type=module', '-e', script],
      { cwd: ROOT, timeout: 60_000 },
      (err, _stdout, stderr) => {
        if (err) return reject(new Error(`${entry}: ${stderr || err.message}`))
        resolve(readFileSync(out, 'utf8').split('\n').filter(Boolean))
      },
    ),
  )
}

const CONTROL_PLANE_ONLY = [
  /\/node_modules\/fastify\//,
  /\/node_modules\/postgres\//,
  /\/node_modules\/@electric-sql\/pglite\//,
  /\/node_modules\/@peculiar\/x509\//,
  /\/src\/portal\//,
  /\/src\/control\//,
  /\/src\/injector\//,
]

t.test('the proxy command loads none of the control plane', async (t) => {
  const [proxy, controlPlane] = await Promise.all([
    modulesLoadedBy('src/cli/serve-proxy.ts'),
    modulesLoadedBy('src/cli/serve-control-plane.ts'),
  ])
  t.ok(
    proxy.some((u) => u.endsWith('/src/proxy/proxy-process.ts')),
    'the hook sees the proxy itself',
  )
  t.same(
    proxy.filter((u) => CONTROL_PLANE_ONLY.some((re) => re.test(u))),
    [],
    'nothing of the control plane, the portal, the injector or X.509',
  )
  for (const re of CONTROL_PLANE_ONLY.slice(0, 3))
    t.ok(
      controlPlane.some((u) => re.test(u)),
      `the control plane's entry does load ${re.source} (the check can see it)`,
    )
})
