import { EventEmitter } from 'node:events'
import type { ServerResponse } from 'node:http'
import t from 'tap'
import { startReceiptStream } from '../../src/audit/receipt-stream.js'
import type { ReceiptWakeups } from '../../src/audit/receipt-wakeups.js'
import type { StoredReceiptRow } from '../../src/core/chain-verifier.js'
import type { ReceiptReader } from '../../src/store/ports/receipt-reader.js'

/** A response whose socket is always full: every write asks the stream to wait for 'drain'. */
class FullResponse extends EventEmitter {
  written = 0
  ended = false
  writeHead() {
    return this
  }
  write() {
    this.written += 1
    return false
  }
  end() {
    this.ended = true
    this.emit('close')
  }
}

t.test('a stream that waits for drain many times leaves no listeners behind', async (t) => {
  const rows: StoredReceiptRow[] = Array.from({ length: 200 }, (_, i) => ({
    seq: i + 1,
    tenantId: 'ten_a',
    receiptId: `rcp_${i}`,
    kind: 'CHECK',
    decision: 'ALLOW',
    createdAt: 1,
    body: JSON.stringify({ seq: i + 1 }),
    hash: 'h',
  }))
  const reader = {
    async rows(_t: string, after: number, _to: number, limit: number) {
      return rows.filter((r) => r.seq > after).slice(0, limit)
    },
  } as unknown as ReceiptReader
  const wakeups = { subscribe: () => () => {} } as unknown as ReceiptWakeups
  const res = new FullResponse()
  const stream = startReceiptStream(res as unknown as ServerResponse, 'ten_a', 0, {
    reader,
    wakeups,
    keepaliveMs: 60_000,
    logger: { warn() {} },
    pageSize: 50,
  })
  const baseline = { close: res.listenerCount('close'), drain: 0 }
  for (let i = 0; i < 150; i++) {
    await new Promise((r) => setImmediate(r))
    res.emit('drain')
  }
  await new Promise((r) => setImmediate(r))
  t.ok(res.written > 100, `it kept writing (${res.written} writes)`)
  t.ok(res.listenerCount('close') <= baseline.close + 1, `close listeners stay ${res.listenerCount('close')}`)
  t.ok(res.listenerCount('drain') <= 1, `drain listeners stay ${res.listenerCount('drain')}`)
  stream.close()
  await stream.done
})
