/**
 * Real servers for tests. These machines (and CI, via .ci/run) run PostgreSQL and Redis;
 * a test that needs one and cannot reach it fails loudly instead of skipping.
 */
export const TEST_DATABASE_URL =
  process.env.WRITEGATE_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
export const TEST_REDIS_URL = process.env.WRITEGATE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'

export function unreachable(what: string, url: string, err: unknown): Error {
  return new Error(
    `${what} at ${url} is unreachable (${(err as Error).message}). Storage tests never skip: start it (see DEVELOPERS.md) or set ${what === 'PostgreSQL' ? 'WRITEGATE_TEST_DATABASE_URL' : 'WRITEGATE_TEST_REDIS_URL'}.`,
  )
}
