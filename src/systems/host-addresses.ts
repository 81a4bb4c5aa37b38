import { lookup } from 'node:dns/promises'

/** Past this, a name is judged by what it is, not by what it resolves to: enrolment does not wait on DNS. */
const LOOKUP_TIMEOUT_MS = 2_000

/** The addresses a host name resolves to now, as the system resolver gives them (none if it does not). */
export async function addressesOf(host: string): Promise<string[]> {
  let timer: NodeJS.Timeout | undefined
  const timedOut = new Promise<string[]>((resolve) => {
    timer = setTimeout(() => resolve([]), LOOKUP_TIMEOUT_MS)
    timer.unref()
  })
  try {
    return await Promise.race([
      lookup(host, { all: true, verbatim: true }).then((found) => found.map((a) => a.address)),
      timedOut,
    ])
  } finally {
    clearTimeout(timer)
  }
}
