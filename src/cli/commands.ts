import type { Settings } from '../config/schema.js'
import { type ArgumentSpec, UsageError } from './arguments.js'

/**
 * The settings, read and validated before a service's modules load: a bad one stops start-up in
 * the half second reading them takes, not after the whole service (a second or two more) loaded.
 */
async function settings(): Promise<Settings> {
  return (await import('../config/load.js')).loadSettings()
}

/**
 * Every `writegate` command: its usage, its arguments, and what runs it. Each implementation is
 * imported only when its command runs, so `--help`, `keygen` or `verify` do not load the
 * control plane.
 */

export interface CommandIo {
  stdout: (s: string) => void
  stderr: (s: string) => void
  stderrIsTty: boolean
  /** Standard input, for commands that read a secret from it. */
  stdin: NodeJS.ReadableStream & { isTTY?: boolean }
}

export interface Command extends ArgumentSpec {
  /** As typed after `writegate`: `keygen`, `manifests import`. */
  readonly name: string
  /** Its arguments, for usage lines: `<file>`. */
  readonly synopsis: string
  /** One line for `writegate help`. */
  readonly summary: string
  /** The rest of `writegate <name> --help`, after the usage line. */
  readonly description: string
  /** Resolves to the exit code (0 when nothing is returned). */
  run(
    positionals: string[],
    options: Record<string, string | undefined>,
    io: CommandIo,
  ): Promise<number | undefined>
}

const SETTINGS_NOTE =
  'Settings come from config/writegate.yaml (or WRITEGATE_CONFIG) with WRITEGATE_* overrides;\nsee docs/configuration.md.'

export const COMMANDS: readonly Command[] = [
  {
    name: 'start',
    synopsis: '',
    summary: 'run the control plane (REST API, audit log); without Redis, the proxy too',
    description: `Runs the control plane: the REST API on server.host:server.port (WRITEGATE_HOST,
WRITEGATE_PORT), the audit log, and Prometheus metrics on metrics.port (WRITEGATE_METRICS_PORT).
Without redis.url (WRITEGATE_REDIS_URL) it also runs gate-proxy in the same process, on
proxy.port (WRITEGATE_PROXY_PORT), over in-memory hot state. Stops on SIGTERM or SIGINT.

${SETTINGS_NOTE}`,
    positionals: [],
    async run() {
      const loaded = await settings()
      await (await import('./serve-control-plane.js')).runControlPlane(loaded)
      return undefined
    },
  },
  {
    name: 'proxy',
    synopsis: '',
    summary: "run gate-proxy, the sidecar that gates an agent's writes (needs Redis)",
    description: `Runs gate-proxy on proxy.port (WRITEGATE_PROXY_PORT), with metrics on metrics.port
(WRITEGATE_METRICS_PORT). It needs redis.url (WRITEGATE_REDIS_URL) and acts as the API key in
proxy.apiKeyFile (WRITEGATE_PROXY_API_KEY_FILE): it serves the systems that key's tenant
enrols (POST /v1/systems), injecting credentials its credentials.allowEnv
(WRITEGATE_CREDENTIALS_ALLOW_ENV) or credentials.allowFiles allow. A control plane must run on
the same Redis with the same redis.keyPrefix: it publishes the policies and systems the proxy
decides by and drains its receipts. Stops on SIGTERM or SIGINT. See docs/proxy.md.

${SETTINGS_NOTE}`,
    positionals: [],
    async run() {
      const loaded = await settings()
      await (await import('./serve-proxy.js')).runProxy(loaded)
      return undefined
    },
  },
  {
    name: 'migrate',
    synopsis: '[--wait <seconds>]',
    summary: 'apply database migrations and exit',
    description: `Applies the database migrations to database.url (WRITEGATE_DATABASE_URL), or to the
embedded PGlite under dataDir (WRITEGATE_DATA_DIR), and exits. \`writegate start\` applies them
too; this is for running them before a deployment. --wait keeps trying a database server that is
not up yet (no listener, no DNS name yet, still starting) for that many seconds (default 0); a
server that refuses (a wrong password, no such database) fails at once.

${SETTINGS_NOTE}`,
    positionals: [],
    options: { wait: { type: 'string' } },
    async run(_positionals, options) {
      await (await import('./migrate.js')).migrateCommand(options)
      return undefined
    },
  },
  {
    name: 'injector',
    synopsis: '',
    summary: 'run the Kubernetes admission webhook that injects gate-proxy (HTTPS)',
    description: `Runs the admission webhook that adds gate-proxy to annotated pods: HTTPS on
injector.port (WRITEGATE_INJECTOR_PORT) with injector.tls.certFile and injector.tls.keyFile
(WRITEGATE_INJECTOR_TLS_CERT_FILE, WRITEGATE_INJECTOR_TLS_KEY_FILE). Stops on SIGTERM or
SIGINT. See docs/kubernetes.md.

${SETTINGS_NOTE}`,
    positionals: [],
    async run() {
      const loaded = await settings()
      await (await import('./serve-injector.js')).runInjector(loaded)
      return undefined
    },
  },
  {
    name: 'keygen',
    synopsis: '<file>',
    summary: 'write a new 32-byte master key (for secrets.masterKeyFile)',
    description: `Writes a new 32-byte master key (base64) to <file>, readable by its owner only, for
secrets.masterKeyFile (WRITEGATE_MASTER_KEY_FILE). Never overwrites an existing file.`,
    positionals: ['file'],
    async run([file], _options, io) {
      ;(await import('./keygen.js')).keygenCommand(file as string, io.stdout)
      return undefined
    },
  },
  {
    name: 'audit-keygen',
    synopsis: '<file>',
    summary:
      'write a new Ed25519 checkpoint signing key (for audit.signingKeyFile)\nand its public key to <file>.pub',
    description: `Writes a new Ed25519 checkpoint signing key to <file> (PEM, readable by its owner
only), for audit.signingKeyFile (WRITEGATE_AUDIT_SIGNING_KEY_FILE), and its public key to
<file>.pub, for \`writegate verify --public-key\`. Never overwrites an existing file.`,
    positionals: ['file'],
    async run([file], _options, io) {
      ;(await import('./audit-keygen.js')).auditKeygenCommand(file as string, io.stdout)
      return undefined
    },
  },
  {
    name: 'verify',
    synopsis: '<export.jsonl> --public-key <file>',
    summary: 'verify an exported audit log offline (exit 0 valid, 1 invalid)',
    description: `Verifies an audit log export (GET /v1/receipts/export) offline, against the public key
of the checkpoint signing key (GET /v1/audit/public-key). Needs no server and no database.
Exit 0: valid. Exit 1: invalid, with one line saying where. Exit 2: it cannot run.`,
    positionals: ['export.jsonl'],
    options: { 'public-key': { type: 'string' } },
    async run([file], options, io) {
      const keyFile = options['public-key']
      if (keyFile === undefined) throw new UsageError('missing --public-key <file>')
      return (await import('./verify-export.js')).verifyCommand(file as string, keyFile, io)
    },
  },
  {
    name: 'ca init',
    synopsis: '<ca.crt> <ca.key> --hosts <host,…> [--days <n>]',
    summary: "create gate-proxy's name-constrained TLS interception CA",
    description: `Writes a new CA certificate and its private key (PKCS#8 PEM, mode 0600) for gate-proxy's
HTTPS interception (proxy.tls.caCertFile and caKeyFile). The certificate carries critical X.509
name constraints: it can vouch only for --hosts (each a DNS name, and its subdomains) and for no
IP address, so a stolen key can impersonate nothing else. Neither file is overwritten. Mount
the key into the proxy container only; give agents the certificate (docs/kubernetes.md).
--days is its lifetime (default 365). See docs/proxy.md#https-interception.`,
    positionals: ['ca.crt', 'ca.key'],
    options: { hosts: { type: 'string' }, days: { type: 'string' } },
    async run([cert, key], options, io) {
      await (await import('./ca-init.js')).caInitCommand(cert as string, key as string, options, io)
      return undefined
    },
  },
  {
    name: 'totp',
    synopsis: '[--secret-file <file> | --secret <base32>]',
    summary: "print the current TOTP code of a tenant's authenticator, to approve a STEP_UP",
    description: `Prints the current 6-digit code of the tenant's step-up authenticator, for a human who
approves a STEP_UP write (POST /v1/agent/actions/{actionId}/approve, "totpCode") without a
phone. The secret is totp.secret of the POST /v1/keys answer that created the tenant (shown
once). It is read from <file>, from standard input (without echo on a terminal), or from
--secret, which leaves it in your shell history and the process list. It is never printed.
A code is accepted once: for a second approval within 30 seconds, wait for the next code.`,
    positionals: [],
    options: { secret: { type: 'string' }, 'secret-file': { type: 'string' } },
    async run(_positionals, options, io) {
      await (await import('./totp.js')).totpCommand(options, io)
      return undefined
    },
  },
  {
    name: 'systems apply',
    synopsis: '-f <file> [--dry-run] [--prune]',
    summary: "enrol a systems file's systems for the key's tenant, printing the diff",
    description: `Makes the tenant's enrolled systems what <file> says (the config/systems.example.yaml
format): creates the systems it lacks, replaces those whose definition differs (only if no one
changed them since they were read: ifVersion), and with --prune deletes those the file does
not name. Prints one line per system (+ create, ~ update, - delete, = unchanged, ? not in the
file); --dry-run prints them and changes nothing. Idempotent: a second run changes nothing.

Talks to the control plane at --url (WRITEGATE_URL; default http://127.0.0.1:8080) with the
admin API key in --api-key-file (or WRITEGATE_API_KEY). See docs/proxy.md.`,
    positionals: [],
    options: {
      file: { type: 'string', short: 'f' },
      'dry-run': { type: 'boolean' },
      prune: { type: 'boolean' },
      url: { type: 'string' },
      'api-key-file': { type: 'string' },
    },
    async run(_positionals, options, io) {
      return (await import('./systems-apply.js')).systemsApplyCommand(options, io)
    },
  },
  {
    name: 'systems export',
    synopsis: '',
    summary: "print the tenant's enrolled systems in the format `systems apply` reads",
    description: `Prints the tenant's enrolled systems as YAML, in the format \`writegate systems apply -f\`
reads (no versions or timestamps; credentials are references, never secrets). Talks to the
control plane at --url (WRITEGATE_URL; default http://127.0.0.1:8080) with the admin API key
in --api-key-file (or WRITEGATE_API_KEY).`,
    positionals: [],
    options: { url: { type: 'string' }, 'api-key-file': { type: 'string' } },
    async run(_positionals, options, io) {
      return (await import('./systems-apply.js')).systemsExportCommand(options, io)
    },
  },
  {
    name: 'manifests import',
    synopsis: '<file>',
    summary: "import a scanner's signed manifest file (manifests.scannerPublicKeyFile)",
    description: `Imports a scanner's signed manifest file into the configured database, after checking
its signature with manifests.scannerPublicKeyFile (WRITEGATE_SCANNER_PUBLIC_KEY_FILE). A bad
signature or an unknown tenant imports nothing. See docs/audit.md.

${SETTINGS_NOTE}`,
    positionals: ['file'],
    async run([file], _options, io) {
      await (await import('./manifests-import.js')).manifestsImportCommand(file as string, io.stdout)
      return undefined
    },
  },
]

/** The command an argument list names, and the arguments after its name. */
export function findCommand(argv: readonly string[]): { command: Command; args: string[] } | null {
  for (const command of COMMANDS) {
    const words = command.name.split(' ')
    if (words.every((w, i) => argv[i] === w)) return { command, args: argv.slice(words.length) }
  }
  return null
}

export function commandUsage(command: Command): string {
  const line = `Usage: writegate ${command.name}${command.synopsis ? ` ${command.synopsis}` : ''}`
  return `${line}\n\n${command.description}\n`
}

export function generalUsage(version: string): string {
  const rows = COMMANDS.map((c) => {
    const head = `${c.name}${c.synopsis ? ` ${c.synopsis}` : ''}`
    const [first, ...more] = c.summary.split('\n')
    const lines =
      head.length <= 16 ? [`  ${head.padEnd(18)}${first}`] : [`  ${head}`, `${' '.repeat(20)}${first}`]
    return [...lines, ...more.map((m) => `${' '.repeat(20)}${m}`)].join('\n')
  })
  return `writegate ${version}

Usage: writegate <command> [arguments]

Commands:
${rows.join('\n')}
  help [<command>]  show this text, or a command's (so does <command> --help)

${SETTINGS_NOTE}
`
}
