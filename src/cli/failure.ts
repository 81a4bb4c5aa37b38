/**
 * The one line a failed command prints. Checked by name, not instanceof, so that printing a
 * usage does not load the settings schema.
 */
export function describeFailure(err: unknown): string {
  const e = err as NodeJS.ErrnoException & { address?: string; port?: number }
  if (e?.name === 'ConfigError' || e?.name === 'CommandError') return e.message
  if (e?.code === 'ECONNREFUSED' || e?.code === 'ENOTFOUND' || e?.code === 'ETIMEDOUT') {
    return `cannot reach a backing server (${e.code}${e.address ? ` ${e.address}:${e.port}` : ''}); check database.url (WRITEGATE_DATABASE_URL) and redis.url (WRITEGATE_REDIS_URL)`
  }
  // A ZodError's message is its issues as multi-line JSON, whose first line is `[`.
  const issue = (err as { issues?: { path?: unknown[]; message?: string }[] } | undefined)?.issues?.[0]
  if (e?.name === 'ZodError' && issue)
    return `${issue.path?.map(String).join('.') || '(root)'}: ${issue.message ?? 'invalid'}`
  return (e?.message ?? String(err)).split('\n')[0] || 'failed'
}
