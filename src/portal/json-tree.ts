import { type Html, html } from './html.js'

const MAX_DEPTH = 32

/**
 * A JSON value as a tree of nested lists: objects and arrays open and close (<details>),
 * leaves are text. Everything is escaped, whatever the agent sent.
 */
export function jsonTree(value: unknown, depth = 0): Html {
  if (depth > MAX_DEPTH) return html`<span class="leaf">…</span>`
  if (value === null) return html`<span class="leaf null">null</span>`
  if (Array.isArray(value)) {
    if (value.length === 0) return html`<span class="leaf">[]</span>`
    return html`<details open><summary>array (${value.length})</summary><ol start="0" class="tree">${value.map(
      (v) => html`<li>${jsonTree(v, depth + 1)}</li>`,
    )}</ol></details>`
  }
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
    if (entries.length === 0) return html`<span class="leaf">{}</span>`
    return html`<details open><summary>object (${entries.length})</summary><ul class="tree">${entries.map(
      ([k, v]) => html`<li><span class="key">${k}</span>: ${jsonTree(v, depth + 1)}</li>`,
    )}</ul></details>`
  }
  if (typeof value === 'string') return html`<span class="leaf string">${JSON.stringify(value)}</span>`
  return html`<span class="leaf">${String(value)}</span>`
}
