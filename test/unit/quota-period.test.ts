import t from 'tap'
import { quotaPeriod, quotaResetsAt } from '../../src/core/quota.js'

const at = (iso: string) => Date.parse(iso) / 1000

t.test('a quota period is the UTC calendar month, at its edges and out of order', async (t) => {
  // In an order that would trip a remembered period: forwards, backwards, across a year.
  const cases: [string, string][] = [
    ['2026-11-26T04:00:00Z', '2026-11'],
    ['2026-11-30T23:59:59Z', '2026-11'],
    ['2026-12-01T00:00:00Z', '2026-12'],
    ['2026-11-30T23:59:59Z', '2026-11'],
    ['2026-11-01T00:00:00Z', '2026-11'],
    ['2026-10-31T23:59:59Z', '2026-10'],
    ['2026-12-31T23:59:59Z', '2026-12'],
    ['2027-01-01T00:00:00Z', '2027-01'],
    ['2024-02-29T12:00:00Z', '2024-02'],
    ['2024-03-01T00:00:00Z', '2024-03'],
    ['2024-02-29T23:59:59Z', '2024-02'],
  ]
  for (const [iso, period] of cases) t.equal(quotaPeriod(at(iso)), period, iso)
  // Years 0–99 (which Date.UTC reads as 19xx) and then 1968: never the other's period.
  const year68 = new Date(0).setUTCFullYear(68, 8, 15) / 1000
  t.equal(quotaPeriod(year68), '68-09')
  t.equal(quotaPeriod(at('1968-09-20T00:00:00Z')), '1968-09')
  t.equal(quotaResetsAt(at('2026-12-31T23:59:59Z')), at('2027-01-01T00:00:00Z'))
})
