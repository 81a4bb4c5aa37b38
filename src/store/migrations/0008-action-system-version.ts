/**
 * A pending action remembers the version of its system it was staged under, so an approval can
 * tell a system changed since (even within the same second, which timestamps cannot). Actions
 * staged before this column, and those of a proxy's unversioned routes file, hold null.
 */
export const up = /* sql */ `
alter table pending_actions add column system_version integer;
`
