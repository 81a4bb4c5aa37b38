// writegate portal: the only script (CSP script-src 'self'; nothing inline). Everything an
// agent sent reaches the page through textContent, never as markup.

// The class of src/portal/visible-text.ts (a test holds them equal): characters that change how
// text reads without showing themselves are shown as their code points, as the pages show them.
const HIDDEN_CLASS =
  '[\\p{Cf}\\p{Cc}\\p{Zl}\\p{Zp}\\p{Default_Ignorable_Code_Point}\\p{Cn}\\u115F\\u1160\\u3164\\uFFA0\\u2800\\u034F\\uFE00-\\uFE0F\\u{E0100}-\\u{E01EF}]'
const HIDDEN = new RegExp(HIDDEN_CLASS, 'gu')

function cell(tr, text) {
  const td = document.createElement('td')
  const s = text === null || text === undefined || text === '' ? '—' : String(text)
  let at = 0
  for (const m of s.matchAll(HIDDEN)) {
    td.append(s.slice(at, m.index))
    const mark = document.createElement('span')
    mark.className = 'hidden-char'
    mark.title = 'a hidden character'
    mark.textContent = `U+${m[0].codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}`
    td.append(mark)
    at = m.index + m[0].length
  }
  td.append(s.slice(at))
  tr.appendChild(td)
}

function startLive() {
  const table = document.getElementById('live-table')
  const form = document.getElementById('live-filters')
  if (!table || !form) return
  const body = table.querySelector('tbody')
  const status = document.getElementById('live-status')
  const field = (name) => form.elements.namedItem(name).value.trim().toLowerCase()
  const shown = (r) => {
    const d = field('decision')
    const has = (v, q) =>
      q === '' ||
      String(v || '')
        .toLowerCase()
        .includes(q)
    return (
      (d === '' || String(r.decision || '').toLowerCase() === d) &&
      has(r.verb, field('verb')) &&
      (has(r.principalName, field('principal')) || has(r.principalId, field('principal'))) &&
      has(r.detail?.systemId, field('system'))
    )
  }
  const refilter = () => {
    for (const tr of body.rows) tr.hidden = !shown(JSON.parse(tr.dataset.receipt))
  }
  form.addEventListener('input', refilter)
  form.addEventListener('change', refilter)
  form.addEventListener('submit', (e) => e.preventDefault())

  const source = new EventSource(`/portal/live/stream?since=${encodeURIComponent(form.dataset.since || '0')}`)
  source.addEventListener('open', () => {
    status.textContent = 'Live: new decisions appear at the top.'
  })
  source.addEventListener('error', () => {
    status.textContent = 'Disconnected; reconnecting…'
  })
  source.addEventListener('receipt', (e) => {
    const r = JSON.parse(e.data)
    const tr = document.createElement('tr')
    tr.dataset.receipt = JSON.stringify({
      decision: r.decision,
      verb: r.verb,
      principalName: r.principalName,
      principalId: r.principalId,
      detail: { systemId: r.detail ? r.detail.systemId : null },
    })
    tr.dataset.seq = String(r.seq)
    cell(tr, r.seq)
    cell(tr, new Date(r.createdAt * 1000).toISOString())
    cell(tr, r.kind)
    cell(tr, r.decision)
    cell(tr, r.verb)
    cell(tr, r.target)
    cell(tr, r.principalName || r.principalId)
    cell(tr, r.detail ? r.detail.systemId : null)
    cell(tr, r.reason)
    tr.hidden = !shown(r)
    body.insertBefore(tr, body.firstChild)
    while (body.rows.length > 500) body.deleteRow(body.rows.length - 1)
  })
}

function startExport() {
  const link = document.getElementById('export-link')
  if (!link) return
  const progress = document.getElementById('export-progress')
  const status = document.getElementById('export-status')
  link.addEventListener('click', async (e) => {
    e.preventDefault()
    progress.hidden = false
    progress.value = 0
    status.textContent = 'Exporting…'
    try {
      const res = await fetch(link.href, { credentials: 'same-origin' })
      if (!res.ok) throw new Error(`the export was refused (${res.status})`)
      const reader = res.body.getReader()
      const chunks = []
      let lines = 0
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        chunks.push(value)
        for (const b of value) if (b === 10) lines++
        progress.value = Math.min(lines, progress.max)
        status.textContent = `${lines} of about ${progress.max} lines`
      }
      const name = /filename="([^"]+)"/.exec(res.headers.get('content-disposition') || '')
      const a = document.createElement('a')
      a.href = URL.createObjectURL(new Blob(chunks, { type: 'application/x-ndjson' }))
      a.download = name ? name[1] : 'writegate-audit.jsonl'
      document.body.appendChild(a)
      a.click()
      a.remove()
      progress.value = progress.max
      status.textContent = `Done: ${lines} lines.`
    } catch (err) {
      status.textContent = `Export failed: ${err.message}`
    }
  })
}

document.addEventListener('DOMContentLoaded', () => {
  startLive()
  startExport()
})
