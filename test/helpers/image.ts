import { readFileSync } from 'node:fs'
import { join } from 'node:path'

const ROOT = join(import.meta.dirname, '..', '..')

/**
 * The variables the image's runtime stage sets (its `ENV` instructions, `KEY=value` form), as
 * every process started from the image sees them. WRITEGATE_CONFIG is mapped to the repository's
 * copy of the file the image ships.
 */
export function imageEnv(): Record<string, string> {
  const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
  const runtime = dockerfile.slice(dockerfile.search(/^FROM \S+ AS runtime$/m))
  const env: Record<string, string> = {}
  for (const m of runtime.matchAll(/^ENV ((?:.*\\\n)*.*)$/gm)) {
    for (const word of (m[1] as string).replace(/\\\n/g, ' ').split(/\s+/).filter(Boolean)) {
      const at = word.indexOf('=')
      if (at < 1) throw new Error(`ENV word without KEY=value: ${word}`)
      env[word.slice(0, at)] = word.slice(at + 1)
    }
  }
  if (env.WRITEGATE_CONFIG !== '/app/config/writegate.yaml')
    throw new Error(`the image's WRITEGATE_CONFIG moved: ${env.WRITEGATE_CONFIG}`)
  env.WRITEGATE_CONFIG = join(ROOT, 'config', 'writegate.yaml')
  return env
}
