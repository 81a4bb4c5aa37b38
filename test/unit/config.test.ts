import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { ConfigError, ENV_OVERRIDES, loadSettings, serviceLinkVariables } from '../../src/config/load.js'

const dir = mkdtempSync(join(tmpdir(), 'wg-config-'))
const file = (name: string, text: string) => {
  const p = join(dir, name)
  writeFileSync(p, text)
  return p
}
const missing = join(dir, 'nope.yaml')

function errorOf(env: NodeJS.ProcessEnv): string {
  try {
    loadSettings(env)
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    return err.message
  }
  throw new Error('expected a ConfigError')
}

t.test('defaults when no config file exists', async (t) => {
  // WRITEGATE_CONFIG unset and no config/writegate.yaml in a fresh cwd.
  const cwd = process.cwd()
  process.chdir(dir)
  t.teardown(() => process.chdir(cwd))
  const s = loadSettings({})
  t.equal(s.server.port, 8080)
  t.equal(s.proxy.port, 15001)
  t.equal(s.database.url, undefined, 'embedded PGlite')
  t.equal(s.redis.url, undefined, 'in-memory hot state')
  t.equal(s.dataDir, './.writegate')
  t.equal(s.issuance.perIpPerHour, 10)
  t.equal(s.issuance.sameEmail, 'proof')
  t.equal(s.quota.checksPerMonth, 100)
})

t.test('the YAML file, with environment overrides on top', async (t) => {
  const p = file('a.yaml', 'server:\n  port: 9000\n  trustProxy: [loopback]\nlog:\n  level: warn\n')
  const s = loadSettings({
    WRITEGATE_CONFIG: p,
    WRITEGATE_PORT: '9100',
    WRITEGATE_TRUST_PROXY: '10.0.0.0/8, 192.168.1.1',
    WRITEGATE_DATABASE_URL: 'memory://',
  })
  t.equal(s.server.port, 9100, 'env wins')
  t.same(s.server.trustProxy, ['10.0.0.0/8', '192.168.1.1'])
  t.equal(s.log.level, 'warn', 'file value kept')
  t.equal(s.database.url, 'memory://')
})

t.test('a bad value stops start-up with one line naming the setting', async (t) => {
  const cases: [NodeJS.ProcessEnv, RegExp][] = [
    [
      { WRITEGATE_CONFIG: missing, WRITEGATE_PORT: 'abc' },
      /^invalid setting WRITEGATE_CONFIG: file .* does not exist$/,
    ],
    [
      { WRITEGATE_CONFIG: file('ok.yaml', ''), WRITEGATE_PORT: 'abc' },
      /^invalid setting server\.port \(WRITEGATE_PORT\): .*"abc"$/,
    ],
    [
      { WRITEGATE_CONFIG: file('ok2.yaml', ''), WRITEGATE_PORT: '70000' },
      /^invalid setting server\.port \(WRITEGATE_PORT\)/,
    ],
    [
      { WRITEGATE_CONFIG: file('ok3.yaml', ''), WRITEGATE_DATABASE_URL: 'mysql://x' },
      /^invalid setting database\.url \(WRITEGATE_DATABASE_URL\): expected a valid URL: postgres/,
    ],
    // Not a URL (a port out of range): refused by the schema, the password never echoed.
    [
      { WRITEGATE_CONFIG: file('ok3b.yaml', ''), WRITEGATE_DATABASE_URL: 'postgres://u:hunter2@db:99999/x' },
      /^invalid setting database\.url \(WRITEGATE_DATABASE_URL\): expected a valid URL: postgres:\/\/…, postgresql:\/\/… or memory:\/\/$/,
    ],
    [
      { WRITEGATE_CONFIG: file('ok4b.yaml', ''), WRITEGATE_REDIS_URL: 'redis://:hunter2@[nope/' },
      /^invalid setting redis\.url \(WRITEGATE_REDIS_URL\): expected a valid URL: redis:\/\/… or rediss:\/\/…$/,
    ],
    [
      { WRITEGATE_CONFIG: file('js.yaml', ''), WRITEGATE_PUBLIC_URL: 'javascript:alert(1)' },
      /^invalid setting server\.publicUrl \(WRITEGATE_PUBLIC_URL\): expected an http:\/\/ or https:\/\/ URL/,
    ],
    [
      { WRITEGATE_CONFIG: file('tlsport.yaml', ''), WRITEGATE_PROXY_TLS_PORT: '15443' },
      /^invalid setting proxy\.tls\.port \(WRITEGATE_PROXY_TLS_PORT\): the TLS port needs the interception CA/,
    ],
    // A section given as one value, or a credential-shaped value anywhere: never echoed.
    [
      { WRITEGATE_CONFIG: file('section.yaml', 'database: postgres://admin:S3cretPW@db:5432/wg\n') },
      /^invalid setting database: .*expected object, received string$/,
    ],
    [
      { WRITEGATE_CONFIG: file('section2.yaml', 'log:\n  level: "svc_live_S3cretPW"\n') },
      /^invalid setting log\.level \(WRITEGATE_LOG_LEVEL\): Invalid option: expected one of .*"silent"$/,
    ],
    // A variable under a setting the file gives as a scalar.
    [
      { WRITEGATE_CONFIG: file('scalar.yaml', 'server: 5\n'), WRITEGATE_PORT: '1' },
      /^invalid setting server\.port \(WRITEGATE_PORT\): server is not a mapping in the config file$/,
    ],
    [
      { WRITEGATE_CONFIG: file('ok4.yaml', ''), WRITEGATE_REDIS_URL: 'http://x' },
      /^invalid setting redis\.url \(WRITEGATE_REDIS_URL\)/,
    ],
    [
      { WRITEGATE_CONFIG: file('mode.yaml', ''), WRITEGATE_REDIS_MODE: 'sentinel' },
      /^invalid setting redis\.mode \(WRITEGATE_REDIS_MODE\): .*"sentinel"$/,
    ],
    [
      { WRITEGATE_CONFIG: file('ptport.yaml', 'proxy:\n  tls:\n    passthroughPort: 0\n') },
      /^invalid setting proxy\.tls\.passthroughPort: /,
    ],
    [
      { WRITEGATE_CONFIG: file('ok5.yaml', ''), WRITEGATE_LOG_LEVEL: 'loud' },
      /^invalid setting log\.level \(WRITEGATE_LOG_LEVEL\)/,
    ],
    [
      { WRITEGATE_CONFIG: file('ok6.yaml', ''), WRITEGATE_TRUST_PROXY: 'loopback,not-an-ip' },
      /^invalid setting server\.trustProxy\.1 \(WRITEGATE_TRUST_PROXY\): expected loopback, .*, got "not-an-ip"$/,
    ],
    [
      { WRITEGATE_CONFIG: file('trust0.yaml', ''), WRITEGATE_TRUST_PROXY: '10.0.0.0/0' },
      /^invalid setting server\.trustProxy\.0 \(WRITEGATE_TRUST_PROXY\)/,
    ],
    [
      { WRITEGATE_CONFIG: file('trustexp.yaml', 'server:\n  trustProxy: [10.0.0.0/1e1]\n') },
      /^invalid setting server\.trustProxy\.0/,
    ],
    // A blank YAML value is not 0: the server would bind a random port.
    [
      { WRITEGATE_CONFIG: file('blank.yaml', 'server:\n  port:\n') },
      /^invalid setting server\.port.*: .*received null$/,
    ],
    [
      { WRITEGATE_CONFIG: file('boolport.yaml', 'proxy:\n  port: false\n') },
      /^invalid setting proxy\.port.*received boolean/,
    ],
    [
      { WRITEGATE_CONFIG: file('unknown.yaml', 'server:\n  prot: 1\n') },
      /^invalid setting server: unknown setting\(s\) prot$/,
    ],
    [
      { WRITEGATE_CONFIG: file('top.yaml', 'colour: blue\n') },
      /^invalid setting \(root\): unknown setting\(s\) colour$/,
    ],
    [
      { WRITEGATE_CONFIG: file('bad.yaml', 'server: [1,\n') },
      /^invalid config file .*bad\.yaml \(WRITEGATE_CONFIG\): /,
    ],
    [{ WRITEGATE_CONFIG: file('list.yaml', '- 1\n- 2\n') }, /expected a mapping at the top level$/],
    [
      { WRITEGATE_CONFIG: file('same.yaml', 'issuance:\n  sameEmail: maybe\n') },
      /^invalid setting issuance\.sameEmail: /,
    ],
  ]
  for (const [env, pattern] of cases) {
    const message = errorOf(env)
    t.match(message, pattern, message)
    t.notOk(message.includes('\n'), 'one line')
  }
})

t.test('a variable that is set but empty is an error naming it, never the default', async (t) => {
  const ok = file('empty-vars.yaml', '')
  for (const [name, o] of Object.entries(ENV_OVERRIDES)) {
    for (const value of ['', '  ']) {
      t.equal(
        errorOf({ WRITEGATE_CONFIG: ok, [name]: value }),
        `invalid setting ${o.path.join('.')} (${name}): the variable is set but empty (unset it to use the settings file or the default)`,
        `${name}=${JSON.stringify(value)}`,
      )
    }
  }
  // A list variable of nothing but separators is empty too.
  t.match(
    errorOf({ WRITEGATE_CONFIG: ok, WRITEGATE_TRUST_PROXY: ' , ' }),
    /\(WRITEGATE_TRUST_PROXY\): the variable is set but empty/,
  )
  t.equal(
    errorOf({ WRITEGATE_CONFIG: '' }),
    'invalid setting WRITEGATE_CONFIG: the variable is set but empty (unset it to use the settings file or the default)',
  )
})

t.test('injector settings: defaults, YAML and WRITEGATE_INJECTOR_* overrides', async (t) => {
  const p = file(
    'inj.yaml',
    'injector:\n  proxy:\n    resources:\n      requests: {cpu: 20m}\n  enforce:\n    excludeOutboundCidrs: [10.96.0.1/32]\n',
  )
  const s = loadSettings({
    WRITEGATE_CONFIG: p,
    WRITEGATE_INJECTOR_PORT: '9443',
    WRITEGATE_INJECTOR_TLS_CERT_FILE: '/tls/crt',
    WRITEGATE_INJECTOR_PROXY_IMAGE: 'registry.example:5000/team/writegate:1.2.3',
    WRITEGATE_INJECTOR_PROXY_SECRET: 'agent-proxy',
  })
  t.equal(s.injector.port, 9443)
  t.equal(s.injector.tls.certFile, '/tls/crt')
  t.equal(s.injector.tls.keyFile, '/etc/writegate/injector-tls/tls.key')
  t.equal(s.injector.proxy.image, 'registry.example:5000/team/writegate:1.2.3')
  t.equal(s.injector.defaults.proxySecret, 'agent-proxy')
  t.equal(s.injector.defaults.routesConfigMap, undefined, 'deprecated: none unless named')
  t.same(s.injector.proxy.resources, { requests: { cpu: '20m' }, limits: {} })
  t.same(s.injector.enforce.excludeOutboundCidrs, ['10.96.0.1/32'])
  const d = loadSettings({ WRITEGATE_CONFIG: file('inj-empty.yaml', '') })
  t.equal(d.injector.port, 8443)
  t.equal(d.injector.proxy.port, 15001)
  t.equal(d.injector.proxy.nativeSidecar, true)
  t.same(d.injector.proxy.resources, {
    requests: { cpu: '50m', memory: '64Mi' },
    limits: { cpu: '1', memory: '256Mi' },
  })
})

t.test('a bad injector value stops start-up with one line naming it', async (t) => {
  const cases: [NodeJS.ProcessEnv, RegExp][] = [
    [
      { WRITEGATE_INJECTOR_PORT: 'https' },
      /^invalid setting injector\.port \(WRITEGATE_INJECTOR_PORT\): .*"https"$/,
    ],
    [
      { WRITEGATE_INJECTOR_PROXY_IMAGE: 'Not An Image!' },
      /^invalid setting injector\.proxy\.image \(WRITEGATE_INJECTOR_PROXY_IMAGE\): expected an image reference/,
    ],
    [
      { WRITEGATE_INJECTOR_PROXY_IMAGE_PULL_POLICY: 'Sometimes' },
      /^invalid setting injector\.proxy\.imagePullPolicy \(WRITEGATE_INJECTOR_PROXY_IMAGE_PULL_POLICY\)/,
    ],
    [
      { WRITEGATE_INJECTOR_ROUTES_CONFIGMAP: 'Routes_Map' },
      /^invalid setting injector\.defaults\.routesConfigMap \(WRITEGATE_INJECTOR_ROUTES_CONFIGMAP\): expected a Kubernetes object name/,
    ],
    [
      {
        WRITEGATE_CONFIG: file(
          'inj-q.yaml',
          'injector:\n  proxy:\n    resources:\n      limits: {memory: lots}\n',
        ),
      },
      /^invalid setting injector\.proxy\.resources\.limits\.memory: expected a Kubernetes quantity/,
    ],
    [
      {
        WRITEGATE_CONFIG: file(
          'inj-c.yaml',
          'injector:\n  enforce:\n    excludeOutboundCidrs: [10.0.0.0/40]\n',
        ),
      },
      /^invalid setting injector\.enforce\.excludeOutboundCidrs\.0: expected a CIDR/,
    ],
    [
      {
        WRITEGATE_CONFIG: file(
          'inj-w.yaml',
          'injector:\n  enforce:\n    excludeOutboundCidrs: [0.0.0.0/0]\n',
        ),
      },
      /^invalid setting injector\.enforce\.excludeOutboundCidrs\.0: a prefix shorter than \/8/,
    ],
    [
      {
        WRITEGATE_CONFIG: file(
          'inj-6.yaml',
          'injector:\n  enforce:\n    excludeOutboundCidrs: ["fd00::/8", "2600::/8"]\n',
        ),
      },
      /^invalid setting injector\.enforce\.excludeOutboundCidrs\.1: a prefix shorter than \/8 \(IPv4\) or \/32 \(IPv6\)/,
    ],
    [
      { WRITEGATE_CONFIG: file('inj-n.yaml', 'injector:\n  proxy:\n    noProxy: ["*"]\n') },
      /^invalid setting injector\.proxy\.noProxy\.0: \* or a prefix shorter than \/8/,
    ],
    [
      { WRITEGATE_CONFIG: file('inj-m.yaml', 'injector:\n  proxy:\n    noProxy: [0.0.0.0/1]\n') },
      /^invalid setting injector\.proxy\.noProxy\.0: \* or a prefix shorter than \/8/,
    ],
    [
      { WRITEGATE_CONFIG: file('inj-u.yaml', 'injector:\n  tls:\n    cert: /x\n') },
      /^invalid setting injector\.tls: unknown setting\(s\) cert$/,
    ],
  ]
  for (const [env, pattern] of cases) {
    const message = errorOf({ WRITEGATE_CONFIG: file('inj-ok.yaml', ''), ...env })
    t.match(message, pattern, message)
    t.notOk(message.includes('\n'), 'one line')
  }
})

t.test("Kubernetes' service-link variables are not taken for port settings", async (t) => {
  // What a pod gets for Services named writegate, writegate-injector, writegate-proxy-tls and
  // writegate-metrics in its namespace (Docker-link style, enableServiceLinks defaults to true).
  const links = {
    WRITEGATE_PORT: 'tcp://10.96.0.12:8080',
    WRITEGATE_SERVICE_HOST: '10.96.0.12',
    WRITEGATE_PORT_8080_TCP: 'tcp://10.96.0.12:8080',
    WRITEGATE_INJECTOR_PORT: 'tcp://[fd00:10:96::3]:443',
    WRITEGATE_PROXY_TLS_PORT: 'TCP://10.96.0.40:15443',
    WRITEGATE_METRICS_PORT: 'udp://10.96.0.41:9464',
  }
  const s = loadSettings({ WRITEGATE_CONFIG: file('links.yaml', 'proxy:\n  port: 15009\n'), ...links })
  t.equal(s.server.port, 8080, 'server.port keeps its default')
  t.equal(s.injector.port, 8443, 'injector.port too')
  t.equal(s.metrics.port, 9464)
  t.equal(s.proxy.port, 15009, 'the file still counts')
  t.same(
    serviceLinkVariables(links),
    ['WRITEGATE_PORT', 'WRITEGATE_METRICS_PORT', 'WRITEGATE_INJECTOR_PORT', 'WRITEGATE_PROXY_TLS_PORT'],
    'and each is named for the start-up log',
  )
  // Anything else in a port variable is the operator's, and still refused by name.
  for (const value of [
    'tcp://writegate:8080',
    'tcp://10.0.0.1',
    'http://10.0.0.1:8080',
    'tcp://10.0.0.1:8080/x',
  ])
    t.match(
      errorOf({ WRITEGATE_CONFIG: file('links2.yaml', ''), WRITEGATE_PORT: value }),
      /^invalid setting server\.port \(WRITEGATE_PORT\)/,
      value,
    )
  t.same(serviceLinkVariables({ WRITEGATE_PORT: '9000', WRITEGATE_DATABASE_URL: 'tcp://10.0.0.1:5432' }), [])
})
