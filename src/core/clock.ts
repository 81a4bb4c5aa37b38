/** Time source. Everything that reads the clock takes one, so tests can pin time. */
export interface Clock {
  /** Milliseconds since the epoch. */
  nowMs(): number
}

export const systemClock: Clock = { nowMs: () => Date.now() }

/** Whole seconds since the epoch: the unit every API timestamp uses. */
export function nowSeconds(clock: Clock): number {
  return Math.floor(clock.nowMs() / 1000)
}

/** A clock that only moves when told to. */
export class ManualClock implements Clock {
  constructor(private ms: number) {}
  nowMs(): number {
    return this.ms
  }
  set(ms: number): void {
    this.ms = ms
  }
  advance(ms: number): void {
    this.ms += ms
  }
}
