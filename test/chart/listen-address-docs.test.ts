import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { ROOT } from '../helpers/chart.js'

/** The image's ENV values (`NAME=value`, continued over `\` lines). */
function imageEnv(): Map<string, string> {
  const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8').replace(/\\\n/g, ' ')
  const env = new Map<string, string>()
  for (const line of text.split('\n').filter((l) => /^ENV\s/.test(l)))
    for (const [, name, value] of line.matchAll(/(WRITEGATE_[A-Z_]+)=(\S+)/g)) env.set(name!, value!)
  return env
}

// Found in review: the table said the image and the chart listen on 0.0.0.0, where they use `::`.
t.test("docs/configuration.md gives each listener the image's address", async (t) => {
  const doc = readFileSync(join(ROOT, 'docs', 'configuration.md'), 'utf8')
  const env = imageEnv()
  for (const name of [
    'WRITEGATE_HOST',
    'WRITEGATE_METRICS_HOST',
    'WRITEGATE_INJECTOR_HOST',
    'WRITEGATE_PROXY_HOST',
  ]) {
    const value = env.get(name)
    t.ok(value, `the image sets ${name}`)
    const row = doc.split('\n').find((l) => l.includes(`| \`${name}\` |`))
    t.ok(row, `${name} has a row`)
    const description = row?.split('|').at(-2) ?? ''
    t.match(description, `\`${value}\``, `${name}: the row says ${value}`)
    t.notMatch(description, /`0\.0\.0\.0`/, `${name}: not 0.0.0.0`)
  }
})
