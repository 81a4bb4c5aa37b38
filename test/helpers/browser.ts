import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { type Browser, chromium, type Page } from 'playwright-core'
import type { Test } from 'tap'

/** Debian's Chromium; .ci/run installs it when missing. A missing browser fails, never skips. */
export const CHROMIUM = process.env.WRITEGATE_CHROMIUM ?? '/usr/bin/chromium'

export async function startBrowser(t: Test): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `no browser at ${CHROMIUM}: install Debian's chromium (apt-get install chromium), as .ci/run does`,
    )
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    // As root in a container, and with no network beyond loopback: no sandbox, nothing in the background.
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  })
  t.teardown(() => browser.close())
  return browser
}

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')

export interface AxeViolation {
  id: string
  impact: string | null
  help: string
  nodes: { target: unknown[] }[]
}

/**
 * axe-core's serious and critical violations on the page. axe runs through the DevTools
 * protocol, which the page's CSP does not govern: the page keeps its real policy.
 */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(AXE_SOURCE)
  const violations = (await page.evaluate(
    "axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations)",
  )) as AxeViolation[]
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
}
