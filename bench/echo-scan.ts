/**
 * What searching an answer for the injected credential costs (docs/proxy.md, "An answer never
 * carries the injected credential back"): per answer, in-process, the work gate-proxy's echo
 * guard adds to every answer of a request that carried a credential: its status text and
 * headers searched, a scanner made, each chunk of its body pushed. Beside it, the same run's
 * baseline: the same answer's chunks copied once (Buffer.concat), the least a relay touches
 * them. No target: `bench:proxy` and `bench:tls` measure the whole path.
 * Run: npm run bench:echo
 */
import {
  answerEncoded,
  createEchoScanner,
  type EchoNeedles,
  echoNeedles,
  headerEcho,
  holdsEcho,
} from '../src/core/credential-echo.js'

const HEADERS = {
  'content-type': 'application/json; charset=utf-8',
  'content-length': '11',
  date: 'Sat, 28 Nov 2026 04:00:00 GMT',
  'x-request-id': 'req_0123456789abcdef',
  'cache-control': 'no-store',
  'x-ratelimit-remaining': '4999',
}

function guard(needles: EchoNeedles, chunks: readonly Buffer[]): boolean {
  if (answerEncoded(HEADERS)) return true
  if (holdsEcho('OK', needles) || headerEcho(HEADERS, needles) !== null) return true
  const scanner = createEchoScanner(needles)
  for (const c of chunks) if (scanner.push(c)) return true
  return false
}

function copy(_needles: EchoNeedles, chunks: readonly Buffer[]): boolean {
  return Buffer.concat(chunks as Buffer[]).length < 0
}

function timeIt(fn: typeof guard, needles: EchoNeedles, chunks: readonly Buffer[], n: number): number {
  for (let i = 0; i < n / 10; i++) fn(needles, chunks) // warm-up
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++)
    if (fn(needles, chunks)) throw new Error('an answer without the secret was judged an echo')
  return Number(process.hrtime.bigint() - t0) / n
}

const body = (bytes: number, chunk: number) => {
  const text = Buffer.from(JSON.stringify({ data: 'x'.repeat(Math.max(0, bytes - 11)) }).slice(0, bytes))
  const out: Buffer[] = []
  for (let at = 0; at < text.length; at += chunk) out.push(text.subarray(at, at + chunk))
  return out
}

const secrets: [string, string][] = [
  ['a token of letters, digits, - and _', 'ghp_0123456789abcdefABCDEF0123456789abcd'],
  ['a secret with / + =', 'AbCd/Ef+Gh=Ij0123456789/klmnopqrstuv=='],
]
const answers: [string, Buffer[], number][] = [
  ['11-byte JSON answer, one chunk', body(11, 65_536), 1_000_000],
  ['16 KiB answer, one chunk', body(16_384, 65_536), 100_000],
  ['64 KiB answer, four 16 KiB chunks', body(65_536, 16_384), 20_000],
]

// A guard that found nothing would measure fastest: it must find each secret first.
for (const [, secret] of secrets)
  if (!guard(echoNeedles(secret), [Buffer.from(`{"auth":"Bearer ${secret}"}`)]))
    throw new Error('the guard missed an answer holding the secret')

console.log(`echo guard per answer, in-process, node ${process.version} (median of 5 rounds)`)
console.log('| secret | answer | guard ns | copy-once baseline ns | guard ÷ baseline |')
console.log('|---|---|---|---|---|')
for (const [secretName, secret] of secrets) {
  const needles = echoNeedles(secret)
  for (const [answerName, chunks, n] of answers) {
    const g: number[] = []
    const b: number[] = []
    for (let round = 0; round < 5; round++) {
      g.push(timeIt(guard, needles, chunks, n))
      b.push(timeIt(copy, needles, chunks, n))
    }
    const median = (xs: number[]) => xs.sort((x, y) => x - y)[2] as number
    const [gm, bm] = [median(g), median(b)]
    console.log(
      `| ${secretName} (${needles.forms.length} form${needles.forms.length === 1 ? '' : 's'}) | ${answerName} | ${gm.toFixed(0)} | ${bm.toFixed(0)} | ${(gm / bm).toFixed(2)} |`,
    )
  }
}
