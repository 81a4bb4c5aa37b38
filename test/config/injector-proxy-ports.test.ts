import t from 'tap'
import { ConfigError, parseSettings } from '../../src/config/load.js'

function errorOf(raw: Record<string, unknown>): string {
  try {
    parseSettings(raw)
  } catch (err) {
    if (err instanceof ConfigError) return err.message
    throw err
  }
  return '(accepted)'
}

// Found in review: the injector took a proxy port equal to its metrics or TLS port, and every
// proxy it injected then exited at start ("metrics.port … is in use").
t.test("the injected proxy's ports must differ: one line naming the setting", async (t) => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [
      { metricsPort: 15001 },
      /^invalid setting injector\.proxy\.metricsPort: must differ from injector\.proxy\.port \(both 15001\)/,
    ],
    [{ port: 9464 }, /^invalid setting injector\.proxy\.metricsPort: must differ from injector\.proxy\.port/],
    [{ tlsPort: 15001 }, /^invalid setting injector\.proxy\.tlsPort: must differ from injector\.proxy\.port/],
    [
      { tlsPort: 9464 },
      /^invalid setting injector\.proxy\.tlsPort: must differ from injector\.proxy\.metricsPort/,
    ],
  ]
  for (const [proxy, pattern] of cases) {
    const message = errorOf({ injector: { proxy } })
    t.match(message, pattern, JSON.stringify(proxy))
    t.notMatch(message, /\n/, 'one line')
  }
  const s = parseSettings({ injector: { proxy: { port: 15002, metricsPort: 15001 } } })
  t.equal(s.injector.proxy.metricsPort, 15001, 'distinct ports are taken')
})
