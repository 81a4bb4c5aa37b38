#!/usr/bin/env node
/**
 * Builds tap's Test class with the plugins package.json names, before tap runs (`npm test`).
 *
 * package.json swaps tap's TypeScript plugin (ts-node) for @tapjs/tsx. tap notices the swap and
 * rebuilds itself when it starts, but the runner that notices has already loaded the old class,
 * so that run still spawns every test file with ts-node's loader (its own comment says the
 * rebuild "won't affect the tap loaded here in the runner"). After `npm ci` on a clean clone,
 * which is every CI run, that is the only run: slower by half, and on a slow machine the largest
 * files ran past tap's per-file timeout. test/unit/test-runtime.test.ts checks the outcome.
 */
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { TapConfig } from '@tapjs/config'
import { signature } from '@tapjs/test'

const config = await TapConfig.load()
if (config.pluginSignature !== signature) {
  const tap = fileURLToPath(import.meta.resolve('tap/package.json')).replace(/package\.json$/, '')
  const run = spawnSync(process.execPath, [`${tap}dist/esm/run.mjs`, 'build'], { stdio: 'inherit' })
  if (run.status !== 0) {
    process.stderr.write('tap-plugins: `tap build` failed\n')
    process.exit(1)
  }
}
