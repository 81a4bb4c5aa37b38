/** Tenants, credentials, principals, and the start of the audit log. */
export const up = /* sql */ `
create table tenants (
  id text primary key,
  name text not null,
  created_at bigint not null,
  sponsor_hash text not null unique,
  -- Decision-state version: bumped in the same transaction as every change that
  -- affects decisions, and published to the hot store before the API answers.
  version bigint not null default 0
);

-- The email that first issued a key owns that tenant; later keys need proof.
create table tenant_emails (
  email text primary key,
  tenant_id text not null references tenants(id),
  created_at bigint not null
);

create table principals (
  id text primary key,
  tenant_id text not null references tenants(id),
  name text not null,
  disabled boolean not null default false,
  created_at bigint not null,
  deleted_at bigint,
  -- Creation order within one second: lists are "oldest first" and must be stable.
  created_order bigint generated always as identity
);
-- Names are unique case-insensitively among live principals only; a tombstone frees its name.
create unique index principals_live_name on principals (tenant_id, lower(name)) where deleted_at is null;
create index principals_by_tenant on principals (tenant_id, created_order);

create table api_keys (
  id text primary key,
  tenant_id text not null references tenants(id),
  principal_id text not null references principals(id),
  secret_hash text not null unique,
  scope text not null check (scope in ('admin', 'agent')),
  email text not null,
  created_at bigint not null,
  revoked_at bigint,
  revoke_reason text
);
create index api_keys_by_principal on api_keys (principal_id);
create index api_keys_by_tenant on api_keys (tenant_id);

-- One live invite per tenant: creating a new one replaces (rotates) the old.
create table invites (
  tenant_id text primary key references tenants(id),
  code_hash text not null unique,
  created_at bigint not null,
  expires_at bigint not null
);

-- The tenant human's step-up authenticator. The secret must be recoverable to verify
-- codes, so it is encrypted with a key that never lives in this database.
create table tenant_totp (
  tenant_id text primary key references tenants(id),
  secret_enc text not null,
  created_at bigint not null,
  last_used_step bigint
);

create table backup_codes (
  tenant_id text not null references tenants(id),
  code_index int not null,
  salt text not null,
  hash text not null,
  used_at bigint,
  primary key (tenant_id, code_index)
);

-- The audit log. seq is per tenant, 1, 2, 3, … with no gaps: it is taken from the
-- tenant's head row, locked and advanced in the same transaction as the insert, so
-- it follows commit order (a BIGSERIAL would not).
create table audit_heads (
  tenant_id text primary key,
  seq bigint not null,
  hash text not null
);

create table receipts (
  tenant_id text not null,
  seq bigint not null,
  receipt_id text not null unique,
  kind text not null,
  decision text,
  created_at bigint not null,
  -- JCS text of the receipt without its hash: exactly the bytes that were hashed.
  body text not null,
  hash text not null,
  primary key (tenant_id, seq)
);
create index receipts_by_time on receipts (tenant_id, created_at);
`
