import { TapConfig } from '@tapjs/config'
import { signature } from '@tapjs/test'
import t from 'tap'

/**
 * The suite runs on tsx, the loader package.json configures, from the first run on a clean clone
 * (scripts/tap-plugins.mjs builds tap's plugins before tap starts; without it, CI's only run
 * loaded every test file through ts-node). This file would fail on such a run.
 */
t.test('test files are loaded by tsx, not ts-node', async (t) => {
  const loaders = process.execArgv.filter((a) => a.startsWith('--import'))
  t.ok(
    loaders.some((a) => a.includes('/@tapjs/tsx/')),
    `the tsx loader is imported (${loaders.join(' ')})`,
  )
  t.notOk(
    loaders.some((a) => a.includes('/@tapjs/typescript/')),
    'the ts-node loader is not',
  )
})

t.test("the build check reads what tap itself compares (tap's internals)", async (t) => {
  const config = await TapConfig.load()
  t.ok(config.pluginSignature.split('\n').includes('@tapjs/tsx'), 'the configured plugins name tsx')
  t.equal(signature, config.pluginSignature, 'the built Test class carries the configured plugins')
})
