/** Policies, custom verbs, grants, the sponsor roster, leases, pending actions and sandbox grants. */
export const up = /* sql */ `
-- Optimistic concurrency for the custom-verb registry: a change that read an older
-- registry version fails with 409 registry_conflict instead of losing an update.
alter table tenants add column verb_registry_version bigint not null default 0;

-- One row per configured layer. scope_key is '' for the tenant default, the environment
-- name, or the principal id. policy is sparse: only explicitly set verbs.
create table policy_layers (
  tenant_id text not null references tenants(id),
  scope text not null check (scope in ('tenant', 'environment', 'principal')),
  scope_key text not null,
  policy jsonb not null,
  version bigint not null,
  updated_at bigint not null,
  primary key (tenant_id, scope, scope_key)
);

-- Names are stored lowercase and never reused: a renamed verb stays as a deprecated alias.
create table custom_verbs (
  tenant_id text not null references tenants(id),
  name text not null,
  description text not null default '',
  status text not null check (status in ('live', 'deprecated')),
  alias_of text,
  created_at bigint not null,
  deprecated_at bigint,
  created_order bigint generated always as identity,
  primary key (tenant_id, name)
);

-- Single-use approvals minted by the sponsor. Consumption is decided atomically in the
-- hot store; consumed_at records it here for snapshots built later.
create table grants (
  id text primary key,
  tenant_id text not null references tenants(id),
  verb text not null,
  target text,
  principal_id text,
  environment text,
  reason text,
  created_at bigint not null,
  expires_at bigint not null,
  consumed_at bigint,
  consumed_by text
);
create index grants_live on grants (tenant_id, expires_at) where consumed_at is null;

-- The sponsor's kill-switch roster. target_kind 'all' has target_id ''.
create table revocations (
  tenant_id text not null references tenants(id),
  target_kind text not null check (target_kind in ('all', 'principal', 'key')),
  target_id text not null,
  reason text,
  revoked_at bigint not null,
  primary key (tenant_id, target_kind, target_id)
);

-- A lease binds one ALLOW to one upstream request; used at most once (used_at).
create table leases (
  id text primary key,
  tenant_id text not null references tenants(id),
  key_id text not null,
  principal_id text not null,
  verb text not null,
  target text,
  system_id text not null,
  binding text not null,
  created_at bigint not null,
  expires_at bigint not null,
  used_at bigint
);

-- A STEP_UP write waiting for a human's TOTP approval.
create table pending_actions (
  id text primary key,
  tenant_id text not null references tenants(id),
  system_id text not null,
  tool text not null,
  params jsonb not null,
  verb text not null,
  target text,
  environment text,
  principal_id text not null,
  key_id text not null,
  staged_receipt_id text not null,
  created_at bigint not null,
  expires_at bigint not null
);
create index pending_actions_by_tenant on pending_actions (tenant_id, expires_at);

-- Checks per key and month, to re-seed quota counters after the hot store lost them.
alter table receipts add column key_id text;
create index receipts_checks_by_key on receipts (created_at, tenant_id, key_id) where kind = 'CHECK';

-- Keyless sandbox grants: demo artifacts, never valid in a tenant's checks.
create table sandbox_grants (
  id text primary key,
  verb text not null,
  target text not null,
  created_at bigint not null,
  expires_at bigint not null
);
create index sandbox_grants_expiry on sandbox_grants (expires_at);
`
