/**
 * Portal sessions (docs/portal.md): server-side, keyed by the SHA-256 of the opaque cookie
 * value, so a copy of this table signs nobody in. Bound to the admin key that signed in: the
 * session ends with the key.
 */
export const up = /* sql */ `
create table portal_sessions (
  session_hash text primary key,
  tenant_id text not null references tenants(id),
  key_id text not null,
  principal_id text not null,
  created_at bigint not null,
  last_seen_at bigint not null,
  expires_at bigint not null
);
create index portal_sessions_by_expiry on portal_sessions (expires_at);
`
