import type { IncomingMessage } from 'node:http'
import t from 'tap'
import { frameBody, keepChunked, markChunked } from '../../src/proxy/body-framing.js'

t.test('a body read whole goes with its own length, whatever framing it came in', async (t) => {
  const chunked: Record<string, string | undefined> = { 'transfer-encoding': 'chunked', host: 'x' }
  frameBody(chunked, Buffer.from('{"a":1}'))
  t.same(chunked, { host: 'x', 'content-length': '7' }, 'chunked: now its length, no Transfer-Encoding')
  const lying: Record<string, string | undefined> = { 'content-length': '999' }
  frameBody(lying, Buffer.alloc(0))
  t.same(lying, { 'content-length': '0' }, 'a length is the bytes read, not the one the agent gave')
  const streamed: Record<string, string | undefined> = { 'transfer-encoding': 'chunked' }
  frameBody(streamed, undefined)
  t.same(streamed, { 'transfer-encoding': 'chunked' }, 'a streamed body keeps its framing')
})

t.test("a streamed chunked body gets its framing back after http-proxy's deleteLength", async (t) => {
  const req = { headers: { 'transfer-encoding': 'chunked' } } as unknown as IncomingMessage
  markChunked(req, undefined)
  // What http-proxy's deleteLength does to a DELETE or OPTIONS without a Content-Length.
  req.headers['content-length'] = '0'
  delete req.headers['transfer-encoding']
  keepChunked(req)
  t.same(req.headers, { 'transfer-encoding': 'chunked' })

  const read = { headers: { 'transfer-encoding': 'chunked' } } as unknown as IncomingMessage
  markChunked(read, Buffer.from('x'))
  read.headers = { 'content-length': '1' }
  keepChunked(read)
  t.same(read.headers, { 'content-length': '1' }, 'a body read whole is left with its length')
})
