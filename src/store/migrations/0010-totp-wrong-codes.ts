/**
 * Wrong step-up codes per tenant, counted across the portal's sign-in and approvals and every
 * replica (src/actions/step-up-verifier.ts). Migration 11 makes it the level of a bucket that
 * drains with time.
 */
export const up = /* sql */ `
alter table tenant_totp add column wrong_codes integer not null default 0;
`
