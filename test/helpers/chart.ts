import { join } from 'node:path'
import { parseAllDocuments } from 'yaml'
import { helm } from './helm.js'

export const ROOT = join(import.meta.dirname, '..', '..')
export const CHART = join(ROOT, 'charts', 'writegate')
export const RELEASE = 'wg'
export const NAMESPACE = 'writegate'

// biome-ignore lint/suspicious/noExplicitAny: rendered manifests are inspected loosely
export type KubeObject = any

/** `helm template` of the chart; throws with helm's message when rendering fails. */
export async function renderChart(args: string[] = [], release = RELEASE, namespace = NAMESPACE) {
  const r = await helm(['template', release, CHART, '--namespace', namespace, ...args])
  if (r.code !== 0) throw new Error(`helm template failed: ${r.stderr.trim()}`)
  const objects: KubeObject[] = parseAllDocuments(r.stdout)
    .map((d) => {
      if (d.errors.length > 0) throw new Error(`rendered YAML does not parse: ${d.errors[0]?.message}`)
      return d.toJSON()
    })
    .filter((o) => o !== null && o !== undefined)
  return objects
}

export function find(objects: KubeObject[], kind: string, name?: string): KubeObject | undefined {
  return objects.find((o) => o.kind === kind && (name === undefined || o.metadata?.name === name))
}

export function all(objects: KubeObject[], kind: string): KubeObject[] {
  return objects.filter((o) => o.kind === kind)
}
