/**
 * Wrong step-up codes per tenant, counted across the portal's sign-in and approvals and every
 * replica, in a window that starts at the first of them: past a limit the authenticator is
 * locked until the sponsor re-enrols it (src/actions/step-up-verifier.ts).
 */
export const up = /* sql */ `
alter table tenant_totp add column wrong_codes integer not null default 0;
alter table tenant_totp add column wrong_codes_since bigint;
`
