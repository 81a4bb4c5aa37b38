import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { LAUNCHER, ROOT, runProcess } from '../helpers/cli.js'

t.test('`npx writegate` runs in a checkout after npm ci, with nothing built', async (t) => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'))
  t.equal(pkg.bin.writegate, 'bin/writegate.js', 'the bin is the committed launcher, not a build output')
  const mode = execFileSync('git', ['ls-files', '-s', 'bin/writegate.js'], { cwd: ROOT, encoding: 'utf8' })
  t.match(mode, /^100755 /, 'committed executable, so a clone can run it')
  // A private npm cache: an npx cache entry left by an older checkout must not decide this.
  const r = await runProcess('npx', ['--no-install', 'writegate', 'help'], {
    env: {
      npm_config_cache: mkdtempSync(join(tmpdir(), 'wg-npx-cache-')),
      npm_config_update_notifier: 'false',
    },
  })
  t.equal(r.code, 0, r.stderr)
  t.match(r.stdout, /^Usage: writegate <command>/m)
})

/** A copy of the launcher beside stub entry points, to see which one it picks. */
function layout(parts: { source?: boolean; dist?: boolean; tsx?: boolean }): string {
  const dir = mkdtempSync(join(tmpdir(), 'wg-launcher-'))
  mkdirSync(join(dir, 'bin'))
  copyFileSync(LAUNCHER, join(dir, 'bin', 'writegate.js'))
  writeFileSync(join(dir, 'package.json'), '{"type":"module"}\n')
  if (parts.source) {
    mkdirSync(join(dir, 'src', 'cli'), { recursive: true })
    // Type syntax: this only runs through tsx.
    writeFileSync(
      join(dir, 'src', 'cli', 'main.ts'),
      'const from: string = "source"\nconsole.log(from, process.argv.slice(2).join(" "))\n',
    )
  }
  if (parts.dist) {
    mkdirSync(join(dir, 'dist', 'cli'), { recursive: true })
    writeFileSync(
      join(dir, 'dist', 'cli', 'main.js'),
      'console.log("dist", process.argv.slice(2).join(" "))\n',
    )
  }
  mkdirSync(join(dir, 'node_modules'))
  if (parts.tsx) {
    for (const m of ['tsx', 'esbuild', '@esbuild', 'get-tsconfig', 'resolve-pkg-maps'])
      symlinkSync(join(ROOT, 'node_modules', m), join(dir, 'node_modules', m))
  }
  return dir
}

t.test('the launcher runs the source when it can, so a stale dist/ is never what runs', async (t) => {
  const stale = await runProcess(process.execPath, [
    join(layout({ source: true, dist: true, tsx: true }), 'bin', 'writegate.js'),
    'keygen',
    'k',
  ])
  t.equal(stale.code, 0, stale.stderr)
  t.equal(stale.stdout, 'source keygen k', 'source and tsx present: the source, with the arguments')

  // The image's case: dist/ built, installed without devDependencies, no tsx.
  const image = await runProcess(process.execPath, [
    join(layout({ source: true, dist: true, tsx: false }), 'bin', 'writegate.js'),
    'help',
  ])
  t.equal(image.stdout, 'dist help')

  const nothing = await runProcess(process.execPath, [
    join(layout({ source: true, tsx: false }), 'bin', 'writegate.js'),
    'help',
  ])
  t.equal(nothing.code, 1)
  t.equal(
    nothing.stderr,
    'writegate: nothing to run: install the dependencies (npm ci) or build it (npm run build)',
  )
})
