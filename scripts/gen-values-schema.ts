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
  'injector.proxy.resources',
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
const QUANTITY = { pattern: '^[0-9]+(\\.[0-9]+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$' }
// The shapes the settings schema (src/config/schema.ts) accepts, so helm refuses what would
// otherwise install and crash-loop. An IPv4 or IPv6 address, with a prefix length for a CIDR.
const OCTET = '(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])'
const IPV4 = `${OCTET}(\\.${OCTET}){3}`
const IPV6 = '[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*'
// Excluded from enforcement: no prefix shorter than /8 (IPv4) or /32 (IPv6): most of the Internet.
const NARROW4 = '(3[0-2]|[12][0-9]|[89])'
const NARROW6 = '(12[0-8]|1[01][0-9]|[4-9][0-9]|3[2-9])'
// …but unique local addresses (fc00::/7, a cluster's own) may be excluded whole.
const ULA = '[fF][cCdD][0-9A-Fa-f]{2}:[0-9A-Fa-f:.]*'
const ULA_PREFIX = '(12[0-8]|1[01][0-9]|[1-9][0-9]|[7-9])'
const EXCLUDED_CIDR = {
  type: 'string',
  pattern: `^(${IPV4}/${NARROW4}|${IPV6}/${NARROW6}|${ULA}/${ULA_PREFIX})$`,
}
// trustProxy: no /0 (proxy-addr refuses to trust everyone).
const TRUSTED = {
  type: 'string',
  pattern: `^(loopback|linklocal|uniquelocal|${IPV4}(/(3[0-2]|[12][0-9]|[1-9]))?|${IPV6}(/(12[0-8]|1[01][0-9]|[1-9][0-9]?))?)$`,
}
const OBJECT_NAME = {
  maxLength: 253,
  pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$',
}

/** Constraints that a default value cannot show. */
const CONSTRAINTS: Record<string, Schema> = {
  'image.repository': { minLength: 1 },
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
  'injector.proxy.logLevel': LOG_LEVEL,
  'injector.enforce.excludeOutboundPorts': { items: { type: 'integer', ...PORT } },
  'injector.enforce.excludeOutboundCidrs': { items: EXCLUDED_CIDR },
  // Not `*` (no proxy for any host); a short CIDR prefix is refused by the injector at start.
  'injector.proxy.noProxy': {
    items: { type: 'string', pattern: '^[A-Za-z0-9.*:/_-]+$', not: { const: '*' } },
  },
  'injector.proxy.routesKey': { pattern: '^[-._a-zA-Z0-9]+$' },
  'injector.defaults.proxySecret': OBJECT_NAME,
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
