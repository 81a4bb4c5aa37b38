import t from 'tap'
import { readableRequest } from '../../src/actions/readable-request.js'
import type { PendingAction } from '../../src/store/ports/index.js'

function staged(contentType: string | null, body: Buffer, tool = '@http'): PendingAction {
  return {
    tool,
    params: { method: 'POST', path: '/v1/x', contentType, body: body.toString('base64') },
  } as unknown as PendingAction
}

t.test('a staged body is shown as JSON, text, or not at all when binary', async (t) => {
  t.match(readableRequest(staged('application/json', Buffer.from('{"a":[1,2]}'))), {
    bodyEncoding: 'json',
    body: { a: [1, 2] },
    bodyBytes: 11,
  })
  t.match(readableRequest(staged('application/vnd.api+json', Buffer.from('{"a":1}'))), {
    bodyEncoding: 'json',
  })
  t.match(
    readableRequest(staged('application/json', Buffer.from('{broken'))),
    { bodyEncoding: 'text', body: '{broken' },
    'JSON that does not parse is shown as the text it is',
  )
  t.match(readableRequest(staged('application/x-www-form-urlencoded', Buffer.from('a=1&b=%20'))), {
    bodyEncoding: 'text',
    body: 'a=1&b=%20',
  })
  t.match(readableRequest(staged('application/octet-stream', Buffer.from([0xff, 0xfe, 0x00, 0x81]))), {
    bodyEncoding: 'binary',
    body: null,
    bodyBytes: 4,
  })
  t.match(readableRequest(staged(null, Buffer.alloc(0))), { bodyEncoding: 'none', body: null, bodyBytes: 0 })
  t.equal(
    readableRequest(staged('application/json', Buffer.from('{}'), 'issue_refund')),
    null,
    'tool calls: params',
  )
})

t.test('a JSON body nested too deep to serialise back is shown as its text', async (t) => {
  const deep = `{"a":${'['.repeat(10_000)}${']'.repeat(10_000)}}`
  const r = readableRequest(staged('application/json', Buffer.from(deep)))
  t.match(r, { bodyEncoding: 'text', body: deep })
  t.doesNotThrow(() => JSON.stringify(r))
})

t.test('JSON an upstream could read otherwise than JSON.parse is shown as its exact text', async (t) => {
  for (const body of [
    '{"amount":1,"amount":1000000}',
    '{"invoice":12345678901234567891}',
    '{"memo":"\\udc00"}',
    '{"amount":1,"Amount":1000000}',
  ])
    t.match(
      readableRequest(staged('application/json', Buffer.from(body))),
      { bodyEncoding: 'text', body },
      body,
    )
  t.match(readableRequest(staged('application/json', Buffer.from('{"amount":1.50,"a":{"amount":2}}'))), {
    bodyEncoding: 'json',
    body: { amount: 1.5, a: { amount: 2 } },
  })
})

t.test('a byte-order mark is kept, to be marked, as the upstream gets it (found in review)', async (t) => {
  const form = readableRequest(staged('application/x-www-form-urlencoded', Buffer.from('\uFEFFdry_run=true')))
  t.match(form, { bodyEncoding: 'text', body: '\uFEFFdry_run=true' })
  const json = readableRequest(staged('application/json', Buffer.from('\uFEFF{"a":1}')))
  t.match(
    json,
    { bodyEncoding: 'text', body: '\uFEFF{"a":1}' },
    'JSON many parsers refuse is not shown as a tree',
  )
})

t.test('an encoded body is shown as what it is, not as text (found in review)', async (t) => {
  const a = staged('application/json', Buffer.from('{"a":1}'))
  ;(a.params as Record<string, unknown>).headers = { 'content-encoding': 'gzip' }
  t.match(readableRequest(a), { bodyEncoding: 'binary', body: null, contentEncoding: 'gzip' })
  ;(a.params as Record<string, unknown>).headers = { 'content-encoding': 'identity' }
  t.match(readableRequest(a), { bodyEncoding: 'json', contentEncoding: 'identity' })
})
