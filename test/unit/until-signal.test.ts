import { EventEmitter } from 'node:events'
import t from 'tap'
import { untilSignal } from '../../src/cli/until-signal.js'
import { capturingLogger } from '../helpers/proxy.js'

/** A process stand-in: signals it is sent, and the status it exits with (once). */
function fakeProcess() {
  const signals = new EventEmitter()
  let resolveExit: (code: number) => void = () => {}
  const exited = new Promise<number>((r) => {
    resolveExit = r
  })
  return {
    host: {
      on: (signal: 'SIGTERM' | 'SIGINT', listener: () => void) => void signals.on(signal, listener),
      exit: (code: number) => resolveExit(code),
    },
    send: (signal: 'SIGTERM' | 'SIGINT') => signals.emit(signal),
    exited,
  }
}

t.test('a clean close exits 0', async (t) => {
  const { logger } = capturingLogger()
  const p = fakeProcess()
  let closed = false
  untilSignal(
    logger,
    async () => {
      closed = true
    },
    p.host,
    60_000,
  )
  p.send('SIGTERM')
  t.equal(await p.exited, 0)
  t.ok(closed)
})

t.test('a close that never finishes: exit 1 at the deadline, with a line saying so', async (t) => {
  const { logger, lines } = capturingLogger()
  const p = fakeProcess()
  // Before the fix the process waited on this for ever (a Postgres reply that never came).
  untilSignal(logger, () => new Promise<void>(() => {}), p.host, 50)
  p.send('SIGTERM')
  t.equal(await p.exited, 1)
  t.ok(lines.some((l) => /did not finish within/.test(String(l.msg))))
})

t.test('a close that fails exits 1; a second signal exits at once', async (t) => {
  const { logger } = capturingLogger()
  const failing = fakeProcess()
  untilSignal(logger, () => Promise.reject(new Error('boom')), failing.host, 60_000)
  failing.send('SIGINT')
  t.equal(await failing.exited, 1)

  const twice = fakeProcess()
  untilSignal(logger, () => new Promise<void>(() => {}), twice.host, 60_000)
  twice.send('SIGINT')
  twice.send('SIGINT')
  t.equal(await twice.exited, 1, 'the second Ctrl-C is not ignored')
})
