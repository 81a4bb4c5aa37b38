/**
 * Wrong step-up codes as a bucket that drains with time (src/actions/step-up-verifier.ts): its
 * level, fractional as it drains, and when it was last computed. A re-enrolment empties it.
 */
export const up = /* sql */ `
alter table tenant_totp alter column wrong_codes type double precision;
alter table tenant_totp add column wrong_codes_at bigint;
`
