import { once } from 'node:events'
import { connect } from 'node:net'
import t from 'tap'
import { newId } from '../../src/core/ids.js'
import { draft } from '../../src/core/receipt.js'
import { startControlPlane } from '../helpers/control-plane.js'
import { capturingLogger, LOG_LEVEL } from '../helpers/proxy.js'

/**
 * Verifying a whole log costs the shared control plane seconds of CPU per million receipts. A
 * client that asks and hangs up takes its verification with it (found in review: the work went
 * on for nobody, as often as a client cared to ask and leave).
 */
t.test('a verification stops when its client leaves; nothing is logged as an error', async (t) => {
  const { logger, lines } = capturingLogger()
  const { cp, api } = await startControlPlane(t, 'fake', {
    logger,
    settings: { server: { port: 0, host: '127.0.0.1' } },
  })
  const port = Number(new URL(await cp.listen()).port)
  const tenant = await api.newTenant()
  // 8 pages of 1,000 receipts to verify.
  for (let i = 0; i < 8; i++)
    await cp.auditTrail.log.append(
      Array.from({ length: 1000 }, () =>
        draft({ receiptId: newId('receipt'), tenantId: tenant.tenantId, kind: 'GRANT', createdAt: 1 }),
      ),
    )
  // Each page read is counted, and the first one holds until the client has gone.
  const reader = cp.auditTrail.services.reader
  const rows = reader.rows.bind(reader)
  let pages = 0
  let release: () => void = () => {}
  const held = new Promise<void>((r) => {
    release = r
  })
  reader.rows = async (...args) => {
    pages++
    if (pages === 1) await held
    return rows(...args)
  }
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => {})
  await once(socket, 'connect')
  socket.write(
    `GET /v1/receipts/verify HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${tenant.apiKey}\r\n\r\n`,
  )
  await new Promise((r) => setTimeout(r, 200))
  socket.destroy()
  await new Promise((r) => setTimeout(r, 100))
  release()
  // Long enough for a verification that went on to read several more pages on a loaded machine.
  await new Promise((r) => setTimeout(r, 1500))
  t.ok(pages <= 2, `stopped after the page in hand (${pages} pages read of 9)`)

  // The same verification, its client staying, reads every page and answers.
  pages = 0
  const whole = await api.get('/v1/receipts/verify', { bearer: tenant.apiKey })
  t.match(whole.body, { valid: true, checked: whole.body.headSeq })
  t.ok(pages >= 8, `read the whole log (${pages} pages)`)
  t.same(
    lines.filter((l) => l.level >= LOG_LEVEL.error),
    [],
    'a client leaving is not an error',
  )
})
