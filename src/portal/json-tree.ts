import { MAX_JSON_DEPTH } from '../core/json-depth.js'
import { type Html, html } from './html.js'
import { visible } from './visible-text.js'

/**
 * A JSON value as a tree of nested lists: objects and arrays open and close (<details>),
 * leaves are text. Everything is escaped, whatever the agent sent.
 */
export function jsonTree(value: unknown, depth = 0): Html {
  // Deeper than anything writegate accepts to stage, or not: shown whole, as JSON text, never cut.
  if (depth > MAX_JSON_DEPTH)
    return html`<span class="leaf string">${visible(JSON.stringify(value) ?? '')}</span>`
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
      // Keys quoted as JSON: a key holding a line break cannot draw a line of its own.
      ([k, v]) =>
        html`<li><span class="key">${visible(JSON.stringify(k))}</span>: ${jsonTree(v, depth + 1)}</li>`,
    )}</ul></details>`
  }
  if (typeof value === 'string')
    return html`<span class="leaf string">${visible(JSON.stringify(value))}</span>`
  return html`<span class="leaf">${String(value)}</span>`
}
