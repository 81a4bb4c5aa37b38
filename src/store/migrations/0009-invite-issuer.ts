/**
 * An invite remembers the key that made it, so redeeming it can be refused once that key is
 * revoked, its principal disabled, or either on the sponsor's roster (a key barred from admin
 * work must not have left a way back in). Invites made before this column hold null.
 */
export const up = /* sql */ `
alter table invites add column issuer_key_id text;
`
