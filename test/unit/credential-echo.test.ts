import fc from 'fast-check'
import t from 'tap'
import {
  answerEncoded,
  createEchoScanner,
  echoNeedles,
  headerEcho,
  holdsEcho,
  MIN_ECHO_BYTES,
} from '../../src/core/credential-echo.js'

const SECRET = 'ghp_A1b2/C3d4+E5f6=G7h8'

t.test('the secret is looked for as sent, percent-encoded and JSON-escaped', async (t) => {
  const forms = echoNeedles(SECRET).forms.map(String)
  t.same(forms, [
    SECRET,
    'ghp_A1b2\\/C3d4+E5f6=G7h8',
    'ghp_A1b2%2FC3d4%2BE5f6%3DG7h8',
    'ghp_A1b2%2fC3d4%2bE5f6%3dG7h8', // .NET's HttpUtility.UrlEncode
    'ghp_A1b2/C3d4%2BE5f6%3DG7h8', // Python's quote(), which keeps `/`
    'ghp_A1b2/C3d4%2bE5f6%3dG7h8',
  ])
  t.same(echoNeedles('abcdefgh').forms.map(String), ['abcdefgh'], 'one form when the others are the same')
  t.same(echoNeedles('x'.repeat(MIN_ECHO_BYTES - 1)).forms, [], 'a secret too short is not looked for')
  // URLSearchParams, Java's URLEncoder and Go's QueryEscape also encode what encodeURIComponent keeps.
  const marks = "abc!def'ghi(jk)*~"
  t.ok(holdsEcho(new URLSearchParams({ t: marks }).toString(), echoNeedles(marks)))
  t.ok(holdsEcho(encodeURIComponent(marks), echoNeedles(marks)))
  t.ok(holdsEcho('abc%21def%27ghi%28jk%29%2A~', echoNeedles(marks)), "Go's QueryEscape")
  // A header value goes out as Latin-1: a secret beyond ASCII is also looked for as those bytes.
  const accented = 'sk-café-0123456789'
  t.ok(holdsEcho(Buffer.from(`{"auth":"${accented}"}`, 'latin1'), echoNeedles(accented)))
  t.ok(holdsEcho(`{"auth":"${accented}"}`, echoNeedles(accented)), 'and as UTF-8')
  t.equal(echoNeedles(accented).half, 9, 'half of its characters, not of its bytes')
  t.equal(
    headerEcho({ 'x-echo': `t=${accented}` }, echoNeedles(accented)),
    'x-echo',
    'a header of Latin-1 bytes',
  )
  // A header of UTF-8 bytes, as Node reads it.
  const asRead = Buffer.from(accented).toString('latin1')
  t.equal(headerEcho({ 'x-echo': asRead }, echoNeedles(accented)), 'x-echo', 'a header of UTF-8 bytes')
  const needles = echoNeedles(SECRET)
  t.ok(holdsEcho(`{"headers":{"authorization":"Bearer ${SECRET}"}}`, needles))
  t.ok(holdsEcho(JSON.stringify({ url: `/cb?token=${encodeURIComponent(SECRET)}` }), needles))
  t.ok(holdsEcho('{"auth":"ghp_A1b2\\/C3d4+E5f6=G7h8"}', needles))
  t.notOk(holdsEcho(SECRET.slice(0, -1), needles), 'a part of it is not the secret')
  t.notOk(holdsEcho('anything', echoNeedles('')))
})

t.test('a header echoing the secret is found by name, in a value or in a list', async (t) => {
  const needles = echoNeedles(SECRET)
  t.equal(headerEcho({ 'content-type': 'text/plain', 'x-echo': `Bearer ${SECRET}` }, needles), 'x-echo')
  t.equal(headerEcho({ 'set-cookie': ['a=1', `t=${SECRET}`] }, needles), 'set-cookie')
  t.equal(headerEcho({ location: `https://x/?t=${encodeURIComponent(SECRET)}` }, needles), 'location')
  // Node spells every header name in lower case.
  // Found by its name, which is not returned: the caller logs what it returns.
  t.equal(headerEcho({ [`x-${SECRET.toLowerCase()}`]: '1' }, needles), "(a header's name)")
  t.equal(headerEcho({ 'x-echo': SECRET.toLowerCase() }, needles), null, 'a value is compared as it is')
  t.equal(headerEcho({ 'content-length': 12, 'x-other': undefined }, needles), null)
  t.equal(headerEcho({ 'x-echo': SECRET }, echoNeedles('short')), null)
})

t.test('an answer whose body is encoded otherwise than as sent cannot be searched', async (t) => {
  t.notOk(answerEncoded({}))
  t.notOk(answerEncoded({ 'content-encoding': 'identity', 'transfer-encoding': 'chunked' }))
  t.ok(answerEncoded({ 'content-encoding': 'gzip' }))
  t.ok(answerEncoded({ 'content-encoding': 'identity, br' }))
  t.ok(answerEncoded({ 'transfer-encoding': 'gzip, chunked' }), 'chunked is undone, gzip is not')
  t.ok(answerEncoded({ 'content-encoding': ['identity', 'deflate'] }))
})

/** Chunks of `body` cut at the given offsets. */
function cut(body: Buffer, at: number[]): Buffer[] {
  const points = [...new Set(at.map((a) => a % (body.length + 1)))].sort((a, b) => a - b)
  const chunks: Buffer[] = []
  let from = 0
  for (const p of points) {
    if (p > from) chunks.push(body.subarray(from, p))
    from = Math.max(from, p)
  }
  if (from < body.length) chunks.push(body.subarray(from))
  return chunks
}

const filler = fc.string({ unit: fc.constantFrom(...'abcdefxyz {}":,\n'.split('')), maxLength: 200 })

t.test(
  'however the body is cut into chunks, the echo is found before it is whole, and not much of it first',
  async (t) => {
    const needles = echoNeedles(SECRET)
    const { half } = needles
    fc.assert(
      fc.property(
        filler,
        filler,
        fc.array(fc.nat(500), { maxLength: 30 }),
        fc.constantFrom(...needles.forms.map(String)),
        (before, after, at, form) => {
          const body = Buffer.from(`${before}${form}${after}`)
          const scanner = createEchoScanner(needles)
          const relayed: Buffer[] = []
          for (const chunk of cut(body, at)) {
            // Fresh memory per chunk, and overwritten once relayed: the scanner must keep its own copy.
            const own = Buffer.from(chunk)
            if (scanner.push(own)) {
              const sent = Buffer.concat(relayed).toString()
              // What the agent got ends with fewer than `half` bytes of the form's start (so less than
              // half of the secret's characters), and never holds all of it.
              for (let k = half; k <= form.length; k++) if (sent.endsWith(form.slice(0, k))) return false
              return !sent.includes(form)
            }
            relayed.push(Buffer.from(own))
            own.fill(0)
          }
          return false
        },
      ),
      { numRuns: 2000 },
    )
    t.pass('found every time')
  },
)

t.test('a body without the secret is never cut, however it is chunked', async (t) => {
  const needles = echoNeedles(SECRET)
  fc.assert(
    fc.property(filler, fc.array(fc.nat(300), { maxLength: 20 }), (text, at) => {
      // Its first few characters, even at a chunk's end, are not half of it.
      const body = Buffer.from(`${text}ghp_A1${text}g`)
      const scanner = createEchoScanner(needles)
      return cut(body, at).every((c) => !scanner.push(c))
    }),
    { numRuns: 1000 },
  )
  t.pass('never cut')
  const scanner = createEchoScanner(needles)
  // A form longer than the secret (percent-encoded) is cut at half of the secret's characters.
  const slashes = 'ABCDEFGHIJ//////'
  t.ok(createEchoScanner(echoNeedles(slashes)).push('...ABCDEFGH'), '8 of its 16 characters')
  t.notOk(createEchoScanner(echoNeedles(slashes)).push('...ABCDEFG'), '7 are less than half')
  t.ok(
    scanner.push(`...${SECRET.slice(0, Math.ceil(SECRET.length / 2))}`),
    'a chunk ending with half of it is',
  )
})

t.test('string chunks (an event stream read as text) are scanned as their bytes', async (t) => {
  const scanner = createEchoScanner(echoNeedles('sécret-de-test'))
  t.notOk(scanner.push('data: {"a":"s'))
  t.ok(scanner.push('écret-de-test"}\n\n'))
})
