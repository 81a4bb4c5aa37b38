import type { ISql } from 'postgres'

/** A connection or a transaction: stores run the same queries on either. */
// biome-ignore lint/complexity/noBannedTypes: `{}` is the driver's own "no custom types" parameter.
export type SqlHandle = ISql<{}>

/** Rows come back with snake_case columns; numbers for BIGINT (see connect.ts). */
export function numOrNull(v: unknown): number | null {
  return v === null || v === undefined ? null : Number(v)
}

/** Postgres unique_violation. */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  const e = err as { code?: string; constraint_name?: string }
  return e?.code === '23505' && (constraint === undefined || e.constraint_name === constraint)
}
