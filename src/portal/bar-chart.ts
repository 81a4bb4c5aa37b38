import { type Html, html } from './html.js'

export interface Bar {
  label: string
  value: number
}

/**
 * A bar chart as inline SVG made on the server: no script, no inline style (presentation
 * attributes only), and a table of the same figures for screen readers and copying.
 */
export function barChart(
  title: string,
  bars: readonly Bar[],
  opts: { width?: number; height?: number } = {},
): Html {
  const width = opts.width ?? 640
  const height = opts.height ?? 160
  const max = Math.max(1, ...bars.map((b) => b.value))
  const slot = width / Math.max(1, bars.length)
  const barWidth = Math.max(2, slot * 0.7)
  const plot = height - 20
  const rects = bars.map((b, i) => {
    const h = Math.round((b.value / max) * (plot - 14))
    const x = Math.round(i * slot + (slot - barWidth) / 2)
    return html`<g><title>${b.label}: ${b.value}</title><rect x="${x}" y="${plot - h}" width="${Math.round(barWidth)}" height="${h}" class="bar"></rect>${
      bars.length <= 12
        ? html`<text x="${Math.round(x + barWidth / 2)}" y="${height - 4}" text-anchor="middle" class="axis">${b.label}</text><text x="${Math.round(x + barWidth / 2)}" y="${plot - h - 3}" text-anchor="middle" class="figure">${b.value}</text>`
        : ''
    }</g>`
  })
  return html`<figure class="chart"><svg role="img" aria-label="${title}" viewBox="0 0 ${width} ${height}" width="100%" height="${height}"><title>${title}</title>${rects}</svg>
<figcaption>${title}</figcaption>
<details><summary>Figures</summary><table><thead><tr><th scope="col">When</th><th scope="col">Count</th></tr></thead><tbody>${bars.map(
    (b) => html`<tr><td>${b.label}</td><td>${b.value}</td></tr>`,
  )}</tbody></table></details></figure>`
}
