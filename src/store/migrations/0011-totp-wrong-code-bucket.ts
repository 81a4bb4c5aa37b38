/**
 * Wrong step-up codes as a bucket that drains with time rather than a count a right code clears
 * (src/actions/step-up-verifier.ts): its level, fractional as it drains, and when it was last
 * computed. `if not exists`: a database of this branch's development may hold the column already.
 */
export const up = /* sql */ `
alter table tenant_totp alter column wrong_codes type double precision;
alter table tenant_totp add column if not exists wrong_codes_at bigint;
`
