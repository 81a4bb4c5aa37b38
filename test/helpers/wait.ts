export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/**
 * Polls until `cond` holds; throws after `timeoutMs`, naming `what` (a function, to say the
 * state it saw). The deadline is a liveness bound for a loaded machine, not a timing assertion.
 */
export async function waitFor(
  cond: () => unknown | Promise<unknown>,
  timeoutMs = 15_000,
  what: string | (() => string) = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await cond())) {
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`,
      )
    await sleep(20)
  }
}
