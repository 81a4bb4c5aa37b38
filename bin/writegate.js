#!/usr/bin/env node
/**
 * The `writegate` command (package.json "bin"), so `npx writegate …` works in a fresh clone
 * after `npm ci`, before anything is built.
 *
 * In a checkout (src/ is here and tsx, a devDependency, is installed) it runs the source
 * through tsx. Otherwise it runs the compiled dist/, as an install without devDependencies
 * would. Source first, not "dist/ when it exists": `npm run build` (and bench:proxy) leave a
 * dist/ behind that goes stale on the next edit or pull, and file times cannot tell (git sets
 * a file's time when it checks it out). The container image runs dist/cli/main.js directly.
 */
import { existsSync } from 'node:fs'

const source = new URL('../src/cli/main.ts', import.meta.url)
const compiled = new URL('../dist/cli/main.js', import.meta.url)

function installed(specifier) {
  try {
    import.meta.resolve(specifier)
    return true
  } catch {
    return false
  }
}

if (existsSync(source) && installed('tsx')) {
  await import('tsx')
  await import(source.href)
} else if (existsSync(compiled)) {
  await import(compiled.href)
} else {
  process.stderr.write(
    'writegate: nothing to run: install the dependencies (npm ci) or build it (npm run build)\n',
  )
  process.exit(1)
}
