/**
 * The public badge: "gated writes | N / 30d". It is drawn from one integer and fixed
 * text only, so nothing a user typed (a label, a tenant name) can ever reach the image.
 */
export const BADGE_LABEL = 'gated writes'
export const BADGE_GREEN = '#2ea44f'
export const BADGE_GREY = '#9f9f9f'

/** Rough advance width of 11px Verdana, enough to size the two boxes. */
function textWidth(text: string): number {
  return Math.round(text.length * 6.6) + 10
}

export function badgeValue(count: number): string {
  const n = Number.isSafeInteger(count) && count > 0 ? count : 0
  return `${n.toLocaleString('en-US')} / 30d`
}

export function renderBadgeSvg(count: number): string {
  const value = badgeValue(count)
  const color = count >= 1 ? BADGE_GREEN : BADGE_GREY
  const lw = textWidth(BADGE_LABEL)
  const vw = textWidth(value)
  const w = lw + vw
  const title = `${BADGE_LABEL}: ${value}`
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="20" role="img" aria-label="${title}">
<title>${title}</title>
<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient>
<clipPath id="r"><rect width="${w}" height="20" rx="3" fill="#fff"/></clipPath>
<g clip-path="url(#r)"><rect width="${lw}" height="20" fill="#555"/><rect x="${lw}" width="${vw}" height="20" fill="${color}"/><rect width="${w}" height="20" fill="url(#s)"/></g>
<g fill="#fff" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" font-size="11">
<text x="${lw / 2}" y="14">${BADGE_LABEL}</text><text x="${lw + vw / 2}" y="14">${value}</text>
</g>
</svg>
`
}
