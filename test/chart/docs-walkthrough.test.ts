import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { parseAllDocuments, parse as parseYaml } from 'yaml'
import { parseSettings } from '../../src/config/load.js'
import type { Settings } from '../../src/config/schema.js'
import { loadSystemsFile, type SystemsFile } from '../../src/config/systems.js'
import { isBuiltinName } from '../../src/core/verbs.js'
import { injectorOptions } from '../../src/injector/injector-process.js'
import { applyJsonPatch } from '../../src/injector/jsonpatch.js'
import type { Pod } from '../../src/injector/kube-types.js'
import { mutatePod } from '../../src/injector/pod-mutation.js'
import { all, CHART, find, type KubeObject, ROOT } from '../helpers/chart.js'
import { LAUNCHER } from '../helpers/cli.js'
import { helm } from '../helpers/helm.js'
import { type Block, blocks, commands, words } from '../helpers/markdown-shell.js'

/**
 * Runs the commands of docs/kubernetes.md and the README's Kubernetes section as far as
 * they go without a cluster. Every command must be one this test knows how to check, so
 * the walk-through cannot drift from the chart, the injector or the files it shows.
 */

function flag(argv: string[], ...names: string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string
    for (const n of names) {
      if (a === n) return argv[i + 1]
      if (a.startsWith(`${n}=`)) return a.slice(n.length + 1)
    }
  }
  return undefined
}

function flags(argv: string[], name: string): string[] {
  const out: string[] = []
  argv.forEach((a, i) => {
    if (a === name && argv[i + 1]) out.push(argv[i + 1] as string)
    else if (a.startsWith(`${name}=`)) out.push(a.slice(name.length + 1))
  })
  return out
}

/** What the walk-through has created so far, as the cluster would hold it. */
interface World {
  files: Map<string, string>
  image?: string
  /** Every image built or tagged so far: an install must run one of them. */
  images: Set<string>
  release?: { name: string; namespace: string; objects: KubeObject[]; settings: Settings }
  namespaces: Set<string>
  labelled: Set<string>
  secrets: Map<string, Map<string, string>>
  /** The tenant's systems, as `writegate systems apply` enrolled them through the API. */
  systems?: SystemsFile
  /** Custom verbs registered so far (POST /v1/verbs): a route may name only these or a built-in. */
  verbs: Set<string>
  deployments: Map<string, KubeObject>
  /** Secret keys the page has read (`kubectl get secret`), as namespace/name:key. */
  read: Set<string>
}

const dir = mkdtempSync(join(tmpdir(), 'wg-docs-'))

async function helmInstall(t: Test, world: World, argv: string[]): Promise<void> {
  const [, verb, name, chart, ...rest] = argv
  t.ok(verb === 'install' || verb === 'upgrade', `helm ${verb}`)
  t.equal(chart, 'charts/writegate', 'the chart in this repository')
  const namespace = flag(rest, '--namespace', '-n') ?? 'default'
  const args = rest.filter((a) => a !== '--create-namespace' && a !== '--wait')
  for (const f of flags(rest, '-f')) t.ok(readFileSync(join(ROOT, f)), `${f} exists`)
  const r = await helm(['template', name as string, join(ROOT, chart as string), ...args], { cwd: ROOT })
  t.equal(r.code, 0, `renders: ${r.stderr}`)
  const lint = await helm(['lint', '--strict', join(ROOT, chart as string), ...args], { cwd: ROOT })
  t.equal(lint.code, 0, `lints: ${lint.stdout}${lint.stderr}`)
  const objects = parseAllDocuments(r.stdout)
    .map((d) => d.toJSON())
    .filter(Boolean)
  const config = objects.find((o: KubeObject) => o.kind === 'ConfigMap' && o.data?.['writegate.yaml'])
  const settings = parseSettings(parseYaml(config.data['writegate.yaml']))
  if (verb === 'install' && !rest.includes('--create-namespace'))
    t.ok(world.namespaces.has(namespace), `namespace ${namespace} exists`)
  world.namespaces.add(namespace)
  if (world.images.size > 0) {
    for (const d of all(objects, 'Deployment'))
      t.ok(
        world.images.has(d.spec.template.spec.containers[0].image),
        `${d.metadata.name} runs an image built above`,
      )
    t.ok(world.images.has(settings.injector.proxy.image), 'the injected proxy runs it too')
  }
  // A second install of the same release is the documented alternative (trial or production):
  // checked above, while the walk-through goes on with the first.
  if (world.release && verb === 'install' && world.release.name === name) return
  world.release = { name: name as string, namespace, objects, settings }
}

function admit(t: Test, world: World, deployment: KubeObject): Pod {
  const release = world.release
  if (!release) throw new Error('nothing installed yet')
  const ns = deployment.metadata.namespace
  t.ok(world.labelled.has(ns), `namespace ${ns} is labelled for injection`)
  const template = deployment.spec.template
  const pod: Pod = { metadata: { ...template.metadata, namespace: ns }, spec: template.spec }
  const m = mutatePod(pod, injectorOptions(release.settings))
  t.equal(m.outcome, 'injected', `${deployment.metadata.name} is injected`)
  if (m.outcome !== 'injected') return pod
  const req = m.request
  t.equal(req.routesConfigMap, null, 'no route-table ConfigMap: the proxy serves the enrolled systems')
  const routes = world.systems
  t.ok(routes, 'the systems were enrolled before the agent starts')
  const proxySecret = world.secrets.get(`${ns}/${req.proxySecret}`)
  t.same(
    [...(proxySecret?.keys() ?? [])].sort(),
    ['api-key', 'redis-url'],
    `Secret ${req.proxySecret} has the proxy's keys`,
  )
  const redis = find(release.objects, 'Secret', `${release.name}-redis`)
  if (redis) {
    // The URL holds the generated password: the page reads it from the chart's Secret first.
    t.equal(proxySecret?.get('redis-url'), '$REDIS_URL', 'redis-url is the URL read above')
    t.ok(
      world.read.has(`${release.namespace}/${redis.metadata.name}:url`),
      "read from the bundled Redis's Secret",
    )
    t.match(redis.stringData.url, /^redis:\/\/:[A-Za-z0-9]{32}@/, 'which has a password')
  }
  const credentialKeys = new Set(
    req.credentialSecrets.flatMap((s) => [...(world.secrets.get(`${ns}/${s}`)?.keys() ?? [])]),
  )
  for (const s of req.credentialSecrets)
    t.ok(world.secrets.has(`${ns}/${s}`), `credential Secret ${s} was created`)
  for (const sys of routes?.systems ?? []) {
    if (sys.credential?.fromEnv)
      t.ok(credentialKeys.has(sys.credential.fromEnv), `${sys.credential.fromEnv} reaches the proxy`)
  }
  const derived = (routes?.systems ?? [])
    .filter((s) => s.baseUrlEnv)
    .map((s) => `${s.baseUrlEnv}=${s.systemId}`)
    .join(',')
  t.equal(
    template.metadata.annotations['writegate.io/base-url-env'],
    derived,
    'base-url-env repeats the enrolled systems',
  )
  const injected = applyJsonPatch(pod, m.patch)
  for (const c of injected.spec.containers) {
    t.notOk(c.envFrom?.length, `${c.name}: no Secrets as env`)
    t.notOk(
      c.env?.some((e) => e.valueFrom),
      `${c.name}: no secret-backed variables`,
    )
    for (const b of req.baseUrls)
      t.equal(c.env?.find((e) => e.name === b.env)?.value, `http://127.0.0.1:15001/${b.systemId}`)
  }
  return injected
}

async function run(t: Test, world: World, line: string): Promise<void> {
  const env: Record<string, string> = {}
  const argv = words(line)
  while (argv[0] && /^[A-Za-z_][A-Za-z0-9_]*=/.test(argv[0])) {
    const a = argv.shift() as string
    env[a.slice(0, a.indexOf('='))] = a.slice(a.indexOf('=') + 1)
  }
  const [cmd] = argv
  const nsOf = () => flag(argv, '-n', '--namespace') ?? 'default'
  const rest = argv.filter(
    (_, i) =>
      i === 0 ||
      !(
        ['-n', '--namespace'].includes(argv[i - 1] as string) ||
        ['-n', '--namespace'].includes(argv[i] as string)
      ),
  )
  const sub = rest.slice(1)

  if (cmd === 'docker' && sub[0] === 'build') {
    world.image = flag(argv, '-t')
    world.images.add(world.image as string)
    t.equal(sub.at(-1), '.', 'builds the repository root')
    t.match(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'), /ENTRYPOINT \["node", "dist\/cli\/main\.js"\]/)
    return
  }
  if (cmd === 'docker' && sub[0] === 'tag') {
    t.equal(sub[1], world.image, 'tags the image just built')
    world.image = sub[2]
    world.images.add(world.image as string)
    return
  }
  if (cmd === 'docker' && sub[0] === 'push') {
    t.equal(sub[1], world.image, 'pushes the image just tagged')
    return
  }
  if (cmd === 'kind' && sub[0] === 'load') {
    t.equal(sub[2], world.image, 'loads the image just built')
    return
  }
  if (cmd === 'helm') return helmInstall(t, world, argv)
  if (cmd === 'npx' && sub[0] === 'writegate' && sub[1] === 'keygen') {
    // Through the launcher `npx writegate` runs (test/cli/docs-commands.test.ts runs npx itself).
    const out = join(dir, `key-${Math.random().toString(36).slice(2)}`)
    execFileSync(process.execPath, [LAUNCHER, 'keygen', out], { cwd: ROOT, stdio: 'pipe' })
    t.equal(Buffer.from(readFileSync(out, 'utf8').trim(), 'base64').length, 32, 'keygen writes a 32-byte key')
    world.files.set(sub[2] as string, 'key')
    return
  }
  if (cmd === 'npx' && sub[0] === 'writegate' && sub[1] === 'ca' && sub[2] === 'init') {
    // Through the launcher, for real: a name-constrained CA for the hosts it names.
    const [cert, key] = [sub[3] as string, sub[4] as string]
    const out = mkdtempSync(join(tmpdir(), 'wg-docs-ca-'))
    execFileSync(
      process.execPath,
      [LAUNCHER, 'ca', 'init', join(out, cert), join(out, key), ...sub.slice(5)],
      {
        cwd: ROOT,
        stdio: 'pipe',
      },
    )
    const pem = readFileSync(join(out, cert), 'utf8')
    t.match(pem, /BEGIN CERTIFICATE/, 'ca init writes the certificate')
    world.files.set(cert, pem)
    world.files.set(key, readFileSync(join(out, key), 'utf8'))
    return
  }
  if (cmd === 'kubectl' && sub[0] === 'create' && sub[1] === 'namespace') {
    world.namespaces.add(sub[2] as string)
    return
  }
  if (cmd === 'kubectl' && sub[0] === 'get' && sub[1] === 'secret') {
    const secret = world.release?.namespace === nsOf() && find(world.release.objects, 'Secret', sub[2])
    t.ok(secret, `Secret ${sub[2]} is rendered in ${nsOf()}`)
    const key = /\.data\.([A-Za-z0-9_-]+)/.exec(flag(argv, '-o') ?? '')?.[1] as string
    t.ok(secret && key in { ...secret.data, ...secret.stringData }, `it has the key ${key}`)
    world.read.add(`${nsOf()}/${sub[2]}:${key}`)
    return
  }
  if (cmd === 'kubectl' && sub[0] === 'create' && sub[1] === 'secret') {
    t.equal(sub[2], 'generic')
    t.ok(world.namespaces.has(nsOf()), `namespace ${nsOf()} exists`)
    const data = new Map<string, string>()
    for (const lit of flags(argv, '--from-literal')) {
      const at = lit.indexOf('=')
      data.set(lit.slice(0, at), lit.slice(at + 1))
    }
    for (const f of flags(argv, '--from-file')) {
      const [key, file] = f.includes('=') ? f.split('=') : [f, f]
      t.ok(world.files.has(file as string), `${file} was made earlier`)
      data.set(key as string, world.files.get(file as string) as string)
    }
    world.secrets.set(`${nsOf()}/${sub[3]}`, data)
    return
  }
  if (cmd === 'npx' && sub[0] === 'writegate' && sub[1] === 'systems' && sub[2] === 'apply') {
    // Through the port-forward, with the admin key of step 3; the file is one shown above.
    t.equal(env.WRITEGATE_URL, 'http://localhost:8080', 'the port-forwarded API')
    t.equal(env.WRITEGATE_API_KEY, '$ADMIN_KEY', 'the admin key')
    const file = flag(argv, '-f') as string
    const text = world.files.get(file)
    t.ok(text, `${file} is shown in the walk-through`)
    const path = join(dir, file)
    writeFileSync(path, text ?? '')
    const systems = loadSystemsFile(path, '-f')
    t.notOk(
      systems.systems.some((s) => s.tenantId),
      'no tenant id to copy in: the key says whose systems they are',
    )
    for (const s of systems.systems)
      for (const r of s.routes)
        t.ok(
          isBuiltinName(r.verb) || world.verbs.has(r.verb),
          `${s.systemId} ${r.path}: verb ${r.verb} is built in or registered first (else 400 unknown_verb)`,
        )
    world.systems = systems
    return
  }
  if (cmd === 'kubectl' && sub[0] === 'label' && sub[1] === 'namespace') {
    const hook = find(world.release?.objects ?? [], 'MutatingWebhookConfiguration').webhooks[0]
    const [k, v] = (sub[3] as string).split('=')
    t.equal(hook.namespaceSelector.matchLabels[k as string], v, 'the label the webhook selects on')
    world.labelled.add(sub[2] as string)
    return
  }
  if (cmd === 'kubectl' && sub[0] === 'apply') {
    const text = world.files.get(flag(argv, '-f') as string)
    t.ok(text, 'applies a manifest shown in the walk-through')
    for (const doc of parseAllDocuments(text ?? '').map((d) => d.toJSON())) {
      if (doc.kind !== 'Deployment') continue
      world.deployments.set(`${doc.metadata.namespace}/${doc.metadata.name}`, doc)
      admit(t, world, doc)
    }
    return
  }
  if (cmd === 'kubectl' && sub[0] === 'patch') {
    const d = world.deployments.get(`${nsOf()}/${(sub[2] as string).replace(/^deployment\//, '')}`)
    t.ok(d, `patches a Deployment applied earlier`)
    const annotations = JSON.parse(flag(argv, '-p') as string).spec.template.metadata.annotations
    Object.assign(d.spec.template.metadata.annotations, annotations)
    const pod = admit(t, world, d)
    if (annotations['writegate.io/enforce'] === 'true')
      t.ok(
        pod.spec.initContainers?.some((c) => c.name === 'writegate-init'),
        'the iptables init container is added',
      )
    return
  }
  // Needs a cluster; checked only for naming things that exist.
  if (cmd === 'kubectl' && sub[0] === 'rollout') {
    const name = (sub[2] as string).replace(/^deployment\//, '')
    const known =
      (world.release?.namespace === nsOf() && find(world.release.objects, 'Deployment', name)) ||
      world.deployments.has(`${nsOf()}/${name}`)
    t.ok(known, `deployment/${name} exists in ${nsOf()}`)
    return
  }
  if (cmd === 'kubectl' && sub[0] === 'port-forward') {
    const svc = find(world.release?.objects ?? [], 'Service', (sub[1] as string).replace(/^svc\//, ''))
    t.ok(svc, `${sub[1]} is rendered`)
    t.ok(
      svc?.spec.ports.some((p: KubeObject) => String(p.port) === (sub[2] as string).split(':')[1]),
      'on its port',
    )
    return
  }
  if (cmd === 'kubectl' && sub[0] === 'exec') {
    t.ok(
      world.deployments.has(`${nsOf()}/${(sub[1] as string).replace(/^deploy\//, '')}`),
      `${sub[1]} was applied`,
    )
    return
  }
  if (cmd === 'curl') {
    t.ok(
      argv.some((a) => /^localhost:8080\/v1\//.test(a)),
      'calls the port-forwarded API',
    )
    if (argv.includes('localhost:8080/v1/verbs')) world.verbs.add(JSON.parse(flag(argv, '-d') as string).name)
    return
  }
  t.fail(`the walk-through test does not know how to check: ${line}`)
}

async function walk(t: Test, markdown: string): Promise<void> {
  const world: World = {
    files: new Map(),
    images: new Set(),
    namespaces: new Set(['default']),
    labelled: new Set(),
    secrets: new Map(),
    deployments: new Map(),
    verbs: new Set(),
    read: new Set(),
  }
  let ran = 0
  for (const block of blocks(markdown)) {
    if (block.lang === 'yaml') {
      const m = block.text.match(/^# file: (\S+)\n/)
      if (m?.[1]) world.files.set(m[1], block.text)
      continue
    }
    if (block.lang !== 'sh') continue
    for (const line of commands(block)) {
      await run(t, world, line)
      ran++
    }
  }
  t.ok(ran > 3, `${ran} commands checked`)
}

t.test('docs/kubernetes.md, command by command', async (t) => {
  await walk(t, readFileSync(join(ROOT, 'docs', 'kubernetes.md'), 'utf8'))
})

t.test("the README's four Kubernetes commands", async (t) => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
  const section = readme.slice(
    readme.indexOf('## Kubernetes'),
    readme.indexOf('\n## ', readme.indexOf('## Kubernetes') + 1),
  )
  const cmds = blocks(section).flatMap((b) => (b.lang === 'sh' ? commands(b) : []))
  t.equal(cmds.length, 4, 'four commands')
  // The label command needs the namespace; the README leaves creating it to the guide.
  await walk(
    t,
    section.replace(
      'kubectl label namespace agents',
      'kubectl create namespace agents\nkubectl label namespace agents',
    ),
  )
})

t.test('the chart README install block uses only values the chart has', async (t) => {
  const readme = readFileSync(join(CHART, 'README.md'), 'utf8')
  const install = blocks(readme).find((b) => b.text.includes('helm install'))
  t.ok(install)
  const line = commands(install as Block).find((l) => l.startsWith('helm install')) as string
  const r = await helm([
    'template',
    ...words(line)
      .slice(2)
      .map((a) => (a === 'charts/writegate' ? CHART : a.startsWith('charts/') ? join(ROOT, a) : a)),
  ])
  t.equal(r.code, 0, r.stderr)
})
