import t from 'tap'
import { createSseSplitter, eventData, withData } from '../../src/proxy/sse-events.js'

/** The event-stream splitter filterToolsList relays through: events as sent, whatever the chunking. */

const split = (chunks: string[]) => {
  const events: { raw: string; data: string | null }[] = []
  const s = createSseSplitter((lines, raw) => events.push({ raw, data: eventData(lines) }))
  for (const c of chunks) s.feed(c)
  return { events, rest: s.rest() }
}

t.test('events end at a blank line, under LF, CRLF and CR line ends', async (t) => {
  const stream = 'data: a\n\nid: 1\r\ndata: b\r\ndata: c\r\n\r\nevent: x\rdata:d\r\r: comment\n\n'
  const whole = split([stream])
  t.same(
    whole.events.map((e) => e.data),
    ['a', 'b\nc', 'd', null],
  )
  t.equal(whole.events.map((e) => e.raw).join(''), stream, 'the raw events are the stream, byte for byte')
  // Every way of cutting it into two chunks gives the same events: a CR at a chunk's end waits for its LF.
  for (let i = 1; i < stream.length; i++) {
    const cut = split([stream.slice(0, i), stream.slice(i)])
    t.same(cut.events, whole.events, `cut at ${i}`)
  }
})

t.test('an event never ended is held, not emitted; its size is what the caller bounds', async (t) => {
  const events: string[] = []
  const s = createSseSplitter((_l, raw) => events.push(raw))
  s.feed('data: {"partial":')
  t.equal(events.length, 0)
  t.equal(s.held, 'data: {"partial":'.length)
  t.equal(s.rest(), 'data: {"partial":')
})

t.test(
  'data lines: the field with no colon, one leading space dropped; rewritten data keeps the other fields',
  async (t) => {
    t.equal(eventData(['data\n', 'data:  two spaces\n']), '\n two spaces')
    t.equal(eventData(['id: 3\n', 'event: m\n']), null)
    t.equal(
      withData(['id: 3\r\n', 'data: a\r\n', 'data: b\r\n', 'retry: 10\r\n'], '{}'),
      'id: 3\r\ndata: {}\nretry: 10\r\n\n',
    )
  },
)
