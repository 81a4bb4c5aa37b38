import type { Metric, Registry } from 'prom-client'

/**
 * Counters and histograms for what happens on every gated request. prom-client's own hash a
 * label object and allocate a closure on every call (≈ 0.4 µs each, four per forwarded write);
 * these keep plain numbers per label set and build the exposition only when scraped, in the
 * same shape prom-client gives its own, and are registered into the same registry.
 */
type Labels = Record<string, string | number>
/** One line of the exposition, as prom-client's own metrics report it from get(). */
interface Sample {
  labels: Labels
  /** A series' own labels, which the registry writes after `labels` (prom-client's order). */
  sharedLabels?: Labels
  value: number
  metricName?: string
}

interface Exposed {
  readonly name: string
  readonly help: string
  readonly type: 'counter' | 'histogram'
  readonly aggregator: 'sum'
  get(): Promise<{ name: string; help: string; type: string; values: Sample[]; aggregator: 'sum' }>
  reset(): void
}

function register(registry: Registry, metric: Exposed): void {
  // Registry takes any metric with a name and get(); its typings list only prom-client's classes.
  registry.registerMetric(metric as unknown as Metric)
}

/** A counter labelled by `labelNames`, incremented with the label values in that order. */
export class HotCounter implements Exposed {
  readonly type = 'counter' as const
  readonly aggregator = 'sum' as const
  private series = new Map<string, { labels: Labels; value: number }>()

  constructor(
    registry: Registry,
    readonly name: string,
    readonly help: string,
    private readonly labelNames: readonly string[],
  ) {
    register(registry, this)
  }

  inc(...values: string[]): void {
    const key = values.join('\u0000')
    const s = this.series.get(key)
    if (s) s.value += 1
    else {
      const labels: Labels = {}
      this.labelNames.forEach((n, i) => {
        labels[n] = values[i] ?? ''
      })
      this.series.set(key, { labels, value: 1 })
    }
  }

  async get() {
    const values = [...this.series.values()].map((s) => ({ labels: { ...s.labels }, value: s.value }))
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }

  reset(): void {
    this.series = new Map()
  }
}

interface Series {
  labels: Labels
  /** Observations per bucket, not cumulative; the last one is +Inf. */
  counts: Float64Array
  sum: number
  count: number
}

/** A histogram with at most one label, observed with that label's value. */
export class HotHistogram implements Exposed {
  readonly type = 'histogram' as const
  readonly aggregator = 'sum' as const
  private series = new Map<string, Series>()
  private readonly bounds: readonly number[]

  constructor(
    registry: Registry,
    readonly name: string,
    readonly help: string,
    buckets: readonly number[],
    private readonly labelName: string | null = null,
  ) {
    this.bounds = [...buckets].sort((a, b) => a - b)
    register(registry, this)
  }

  observe(value: number, labelValue = ''): void {
    // Like prom-client: a NaN or infinite value is a programming error, not a data point.
    if (!Number.isFinite(value)) throw new TypeError(`${this.name}: not a finite number: ${value}`)
    let s = this.series.get(labelValue)
    if (!s) {
      s = {
        labels: this.labelName ? { [this.labelName]: labelValue } : {},
        counts: new Float64Array(this.bounds.length + 1),
        sum: 0,
        count: 0,
      }
      this.series.set(labelValue, s)
    }
    let i = 0
    while (i < this.bounds.length && value > (this.bounds[i] as number)) i++
    ;(s.counts as Float64Array)[i] = (s.counts[i] as number) + 1
    s.sum += value
    s.count += 1
  }

  /** What the registry writes for the text exposition; the same shape prom-client's Histogram gives. */
  async getForPromString() {
    const values: Sample[] = []
    for (const s of this.series.values()) {
      let cumulative = 0
      for (let i = 0; i <= this.bounds.length; i++) {
        cumulative += s.counts[i] as number
        const le = i < this.bounds.length ? (this.bounds[i] as number) : '+Inf'
        values.push({
          labels: { le },
          sharedLabels: s.labels,
          value: cumulative,
          metricName: `${this.name}_bucket`,
        })
      }
      values.push({ labels: {}, sharedLabels: s.labels, value: s.sum, metricName: `${this.name}_sum` })
      values.push({ labels: {}, sharedLabels: s.labels, value: s.count, metricName: `${this.name}_count` })
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }

  async get() {
    const data = await this.getForPromString()
    const values = data.values.map(({ labels, sharedLabels, value, metricName }) => ({
      labels: { ...labels, ...sharedLabels },
      value,
      ...(metricName ? { metricName } : {}),
    }))
    return { ...data, values }
  }

  reset(): void {
    this.series = new Map()
  }
}
