/**
 * Wrong step-up codes since the last right one, per tenant, counted across the portal's sign-in
 * and approvals and every replica: past a limit the authenticator is locked until the sponsor
 * re-enrols it (NIST SP 800-63B §5.2.2 caps consecutive failures at 100).
 */
export const up = /* sql */ `
alter table tenant_totp add column wrong_codes integer not null default 0;
`
