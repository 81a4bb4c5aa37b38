/**
 * Generates charts/writegate/values.schema.json and the values table in
 * charts/writegate/README.md from values.yaml: its structure gives the types, the comment
 * above each key gives the description. Run after editing values.yaml:
 *
 *   npx tsx scripts/gen-values-schema.ts
 *
 * test/chart/values-schema.test.ts fails when the committed files are stale, or when a
 * value has no comment.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { isMap, isScalar, type Node, type Pair, parseDocument, type YAMLMap } from 'yaml'
import { INJECTOR_PATTERNS, MIN_EXCLUDED_PREFIX, OBJECT_NAME_MAX } from '../src/config/schema.js'

type Schema = Record<string, unknown>

/** Objects whose keys are the user's (Kubernetes fragments, label maps): typed as open objects. */
const OPEN_OBJECTS = new Set([
  'settings',
  'serviceAccount.annotations',
  'controlPlane.resources',
  'controlPlane.podAnnotations',
  'controlPlane.podLabels',
  'controlPlane.nodeSelector',
  'controlPlane.affinity',
  'migrations.resources',
  'systems.apply.resources',
  'injector.namespaceSelector',
  'injector.objectSelector',
  'injector.resources',
  'injector.nodeSelector',
  'injector.affinity',
  'injector.proxy.resources', // one row in the table; its shape is in CONSTRAINTS
  'certManager.issuerRef',
  'postgresql.resources',
  'redis.resources',
  'metrics.serviceMonitor.labels',
  'metrics.podMonitor.labels',
  'metrics.dashboard.labels',
  'metrics.dashboard.annotations',
])

const LOG_LEVEL = { enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] }
const PORT = { minimum: 1, maximum: 65535 }
const INT_OR_PERCENT = { type: ['integer', 'string'], pattern: '^[0-9]+%$' }
const QUANTITY = { pattern: INJECTOR_PATTERNS.quantity }

// What the injector's settings (src/config/schema.ts) accept, so helm refuses what would
// otherwise install and crash-loop. Its regular expressions are used as they are; its address
// checks (node's isIP) are rebuilt here, and test/chart/values-schema.test.ts holds the two
// to the same verdicts.
const bare = (pattern: string) => pattern.replace(/^\^/, '').replace(/\$$/, '')
/** A value that may also be empty (the chart's "unset"). */
const orEmpty = (pattern: string) => `^(${bare(pattern)})?$`

/** Decimal numbers (leading zeros allowed, as the settings' /^\d+$/ does) below `n`. */
function below(n: number): string {
  const byPrefix = new Map<string, number[]>()
  for (let i = 0; i < n; i++) {
    const s = String(i)
    const prefix = s.slice(0, -1)
    byPrefix.set(prefix, [...(byPrefix.get(prefix) ?? []), Number(s.at(-1))])
  }
  const alts = [...byPrefix].map(([prefix, digits]) => {
    const lo = Math.min(...digits)
    const hi = Math.max(...digits)
    return `${prefix}${lo === hi ? lo : `[${lo}-${hi}]`}`
  })
  return `0*(${alts.join('|')})`
}

const OCTET = '(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])'
const IPV4 = `${OCTET}(\\.${OCTET}){3}`
/** node's isIP for IPv6 (lib/internal/net.js), without a zone (%eth0): k groups, then `::` or not. */
const HEX = '[0-9A-Fa-f]{1,4}'
const rep = (x: string, lo: number, hi: number) => (hi === 0 ? '' : `(${x}){${lo},${hi}}`)
const IPV6 = `(${[
  `(${HEX}:){7}(${HEX}|:)`,
  `(${HEX}:){6}(${IPV4}|:${HEX}|:)`,
  ...[5, 4, 3, 2, 1, 0].map(
    (k) =>
      `${k > 0 ? `(${HEX}:){${k}}` : ':'}(${rep(`:${HEX}`, 0, 5 - k)}:${IPV4}|${rep(`:${HEX}`, 1, 7 - k)}|:)`,
  ),
].join('|')})`
const { 4: MIN4, 6: MIN6, uniqueLocal: MIN_ULA } = MIN_EXCLUDED_PREFIX
/** An excluded range that is most of the Internet (tooWide in the settings). */
const TOO_WIDE = {
  anyOf: [
    // What follows a second `/` is not read (and makes no CIDR).
    { pattern: `^${IPV4}/${below(MIN4)}(/.*)?$` },
    { pattern: `^${IPV6}/${below(MIN_ULA)}(/.*)?$` },
    // Unique local addresses (fc00::/7: the first group fc00 to fdff) may be excluded whole.
    { pattern: `^${IPV6}/${below(MIN6)}(/.*)?$`, not: { pattern: '^[fF][cCdD][0-9A-Fa-f]{2}:' } },
  ],
}
const EXCLUDED_CIDR = {
  type: 'string',
  pattern: `^(${IPV4}/${below(33)}|${IPV6}/${below(129)})$`,
  not: TOO_WIDE,
}
const NO_PROXY = {
  type: 'string',
  pattern: INJECTOR_PATTERNS.noProxy,
  not: { anyOf: [{ const: '*' }, TOO_WIDE] },
}
// trustProxy: no /0 (proxy-addr refuses to trust everyone).
const TRUSTED = {
  type: 'string',
  pattern: `^(loopback|linklocal|uniquelocal|${IPV4}(/(3[0-2]|[12][0-9]|[1-9]))?|${IPV6}(/(12[0-8]|1[01][0-9]|[1-9][0-9]?))?)$`,
}
const OBJECT_NAME = { maxLength: OBJECT_NAME_MAX, pattern: INJECTOR_PATTERNS.objectName }
const OPTIONAL_OBJECT_NAME = { maxLength: OBJECT_NAME_MAX, pattern: orEmpty(INJECTOR_PATTERNS.objectName) }
// The proxy's image is `<repository>:<tag>` (writegate.proxyImage), either from image.* or injector.proxy.*.
const IMAGE_NAME = `^${INJECTOR_PATTERNS.imageName}$`
const IMAGE_TAG = orEmpty(`${INJECTOR_PATTERNS.imageTag}(${INJECTOR_PATTERNS.imageDigest})?`)
const RESOURCE_LIST = {
  type: 'object',
  additionalProperties: false,
  properties: { cpu: { type: 'string', ...QUANTITY }, memory: { type: 'string', ...QUANTITY } },
}

/** Constraints that a default value cannot show. */
const CONSTRAINTS: Record<string, Schema> = {
  'image.repository': { minLength: 1, pattern: IMAGE_NAME },
  'image.tag': { pattern: IMAGE_TAG },
  'image.pullPolicy': { enum: ['Always', 'IfNotPresent', 'Never'] },
  'externalRedis.mode': { enum: ['standalone', 'cluster'] },
  'controlPlane.replicas': { minimum: 2 },
  'controlPlane.port': PORT,
  'controlPlane.logLevel': LOG_LEVEL,
  'controlPlane.service.type': { enum: ['ClusterIP', 'NodePort', 'LoadBalancer'] },
  'controlPlane.service.port': PORT,
  'controlPlane.pdb.minAvailable': INT_OR_PERCENT,
  'controlPlane.autoscaling.minReplicas': { minimum: 2 },
  'controlPlane.autoscaling.maxReplicas': { minimum: 2 },
  'controlPlane.autoscaling.targetCPUUtilizationPercentage': { minimum: 1, maximum: 100 },
  'migrations.backoffLimit': { minimum: 0 },
  'migrations.activeDeadlineSeconds': { minimum: 1 },
  'migrations.waitSeconds': { minimum: 0, maximum: 3600 },
  'injector.replicas': { minimum: 1 },
  'injector.port': PORT,
  'injector.logLevel': LOG_LEVEL,
  'injector.timeoutSeconds': { minimum: 1, maximum: 30 },
  'injector.pdb.minAvailable': INT_OR_PERCENT,
  'injector.certValidityDays': { minimum: 1 },
  'injector.proxy.port': PORT,
  'injector.proxy.metricsPort': PORT,
  'injector.proxy.tlsPort': PORT,
  'injector.proxy.repository': { pattern: orEmpty(IMAGE_NAME) },
  'injector.proxy.tag': { pattern: IMAGE_TAG },
  'injector.proxy.resources': {
    additionalProperties: false,
    properties: { requests: RESOURCE_LIST, limits: RESOURCE_LIST },
  },
  'injector.proxy.logLevel': LOG_LEVEL,
  'injector.enforce.excludeOutboundPorts': { items: { type: 'integer', ...PORT } },
  'injector.enforce.excludeOutboundCidrs': { items: EXCLUDED_CIDR },
  // Not `*`, nor most of the Internet: agents would go around the proxy.
  'injector.proxy.noProxy': { items: NO_PROXY },
  'injector.proxy.routesKey': { pattern: INJECTOR_PATTERNS.routesKey },
  'injector.defaults.proxySecret': OBJECT_NAME,
  'injector.defaults.routesConfigMap': OPTIONAL_OBJECT_NAME,
  'injector.defaults.tlsCaSecret': OPTIONAL_OBJECT_NAME,
  'controlPlane.trustProxy': { items: TRUSTED },
  'postgresql.persistence.size': QUANTITY,
  'redis.persistence.size': QUANTITY,
  'redis.appendfsync': { enum: ['always', 'everysec', 'no'] },
  'metrics.port': PORT,
}

export interface ValueRow {
  key: string
  type: string
  default: string
  description: string
}

export interface Generated {
  schema: Schema
  rows: ValueRow[]
  /** Keys with no comment above them: every value must be documented. */
  undocumented: string[]
}

function clean(comment: string | null | undefined): string {
  if (!comment) return ''
  // A comment block separated by a blank line (the file header, say) belongs to what is above.
  const blocks = comment.split(/\n\s*\n/)
  return (blocks.at(-1) ?? '')
    .split('\n')
    .map((l) => l.trim())
    .join(' ')
    .trim()
}

function typeOf(value: unknown): string {
  if (Array.isArray(value)) return 'array'
  if (value === null) return 'null'
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number'
  return typeof value
}

function walkMap(map: YAMLMap, prefix: string, mapComment: string, out: Generated): Schema {
  const properties: Record<string, Schema> = {}
  map.items.forEach((pair: Pair, i) => {
    const key = String(isScalar(pair.key) ? pair.key.value : pair.key)
    const path = prefix ? `${prefix}.${key}` : key
    const keyNode = pair.key as Node | null
    let description = clean(keyNode?.commentBefore)
    if (!description && i === 0) description = clean(mapComment)
    if (!description) out.undocumented.push(path)
    const node = pair.value as Node | null
    const value = node && 'toJSON' in node ? node.toJSON() : node
    let schema: Schema
    if (isMap(node) && node.items.length > 0 && !OPEN_OBJECTS.has(path)) {
      schema = walkMap(node, path, node.commentBefore ?? '', out)
    } else {
      const type = typeOf(value)
      schema = { type: type === 'null' ? ['string', 'null'] : type }
      if (type === 'object') schema.additionalProperties = true
      Object.assign(schema, CONSTRAINTS[path] ?? {})
      out.rows.push({
        key: path,
        type: [schema.type].flat().join(' or '),
        default: JSON.stringify(value),
        description,
      })
    }
    if (description) schema = { description, ...schema }
    properties[key] = schema
  })
  return { type: 'object', additionalProperties: false, properties }
}

export function generate(valuesYaml: string): Generated {
  const doc = parseDocument(valuesYaml)
  if (!isMap(doc.contents)) throw new Error('values.yaml must be a mapping')
  const out: Generated = { schema: {}, rows: [], undocumented: [] }
  const root = walkMap(doc.contents, '', '', out)
  // Helm hands `global` to every chart that is used as a subchart.
  ;(root.properties as Record<string, Schema>).global = { type: 'object', additionalProperties: true }
  out.schema = {
    $schema: 'http://json-schema.org/draft-07/schema#',
    title: 'writegate chart values',
    ...root,
  }
  return out
}

export const TABLE_START = '<!-- values-table:start (generated by scripts/gen-values-schema.ts) -->'
export const TABLE_END = '<!-- values-table:end -->'

export function renderTable(rows: ValueRow[]): string {
  const esc = (s: string) => s.replace(/\|/g, '\\|')
  return [
    '| Key | Type | Default | Description |',
    '|---|---|---|---|',
    ...rows.map((r) => `| \`${r.key}\` | ${r.type} | \`${esc(r.default)}\` | ${esc(r.description)} |`),
  ].join('\n')
}

/** The README with its values table replaced. */
export function withTable(readme: string, rows: ValueRow[]): string {
  const start = readme.indexOf(TABLE_START)
  const end = readme.indexOf(TABLE_END)
  if (start < 0 || end < start) throw new Error('README.md has no values-table markers')
  return `${readme.slice(0, start + TABLE_START.length)}\n${renderTable(rows)}\n${readme.slice(end)}`
}

export function schemaText(schema: Schema): string {
  return `${JSON.stringify(schema, null, 2)}\n`
}

export const CHART_DIR = join(import.meta.dirname, '..', 'charts', 'writegate')

if (process.argv[1] && import.meta.filename === process.argv[1]) {
  const g = generate(readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8'))
  if (g.undocumented.length > 0) {
    process.stderr.write(`values without a comment: ${g.undocumented.join(', ')}\n`)
    process.exit(1)
  }
  writeFileSync(join(CHART_DIR, 'values.schema.json'), schemaText(g.schema))
  const readmePath = join(CHART_DIR, 'README.md')
  writeFileSync(readmePath, withTable(readFileSync(readmePath, 'utf8'), g.rows))
  process.stdout.write(`wrote values.schema.json and the README values table (${g.rows.length} values)\n`)
}
