/**
 * Templates of enrolled tools (a tool's `target`, a revert's `params`): `{name}` reads a
 * param, `{params.a.b}` a nested param, `{result.a.b}` the upstream's JSON answer. A template
 * that is exactly one placeholder keeps the value's JSON type (an id stays a number); any
 * other template is text, and may only interpolate strings, numbers and booleans.
 */
export interface TemplateScope {
  params: Record<string, unknown>
  result?: unknown
}

export type Filled = { ok: true; value: unknown } | { ok: false; missing: string }

const PLACEHOLDER = /\{([A-Za-z0-9_.-]+)\}/g

function lookup(scope: TemplateScope, ref: string): { found: boolean; value: unknown } {
  const parts = ref.split('.')
  let node: unknown
  if (parts[0] === 'result') {
    node = scope.result
    parts.shift()
  } else {
    if (parts[0] === 'params') parts.shift()
    node = scope.params
  }
  for (const p of parts) {
    if (node === null || typeof node !== 'object' || Array.isArray(node) || !Object.hasOwn(node, p))
      return { found: false, value: undefined }
    node = (node as Record<string, unknown>)[p]
  }
  return { found: node !== undefined, value: node }
}

export function fillTemplate(template: string, scope: TemplateScope): Filled {
  const whole = /^\{([A-Za-z0-9_.-]+)\}$/.exec(template)
  if (whole) {
    const v = lookup(scope, whole[1] as string)
    return v.found && v.value !== null
      ? { ok: true, value: v.value }
      : { ok: false, missing: whole[1] as string }
  }
  let missing: string | null = null
  const text = template.replace(PLACEHOLDER, (_m, ref: string) => {
    const v = lookup(scope, ref)
    if (!v.found || !['string', 'number', 'boolean'].includes(typeof v.value)) {
      missing ??= ref
      return ''
    }
    return String(v.value)
  })
  return missing === null ? { ok: true, value: text } : { ok: false, missing }
}

/** A text template (a decision target): null when a placeholder cannot be filled. */
export function fillText(template: string, scope: TemplateScope): string | null {
  const f = fillTemplate(template, scope)
  if (!f.ok) return null
  if (typeof f.value === 'string') return f.value
  // A receipt's target is text or null, never absent: what JSON cannot hold has no target.
  return JSON.stringify(f.value) ?? null
}
