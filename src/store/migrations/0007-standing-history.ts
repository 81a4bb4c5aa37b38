/**
 * What a credential outstanding at a revocation needs to stay dead after a reinstate (contract
 * §3: a token whose key or principal was revoked after issue is `revoked`): a lifted roster entry
 * is kept, with when it was lifted, and a principal remembers when it was last disabled and
 * enabled.
 */
export const up = /* sql */ `
alter table revocations add column lifted_at bigint;
alter table principals add column disabled_at bigint;
alter table principals add column enabled_at bigint;
-- Disabled before this migration: disabled as of now, so an enable later still bars what it held.
update principals set disabled_at = extract(epoch from now())::bigint where disabled;
`
