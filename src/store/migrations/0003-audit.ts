/** Signed checkpoints of the audit log, badge tokens and scanner manifests. */
export const up = /* sql */ `
-- Signed chain heads. One per (tenant, seq): replicas that checkpoint the same head
-- insert the same key, and the first one stored wins.
create table audit_checkpoints (
  tenant_id text not null,
  seq bigint not null,
  hash text not null,
  at bigint not null,
  -- Ed25519 over the JCS of {tenantId, seq, hash, at}, base64; key_id names the key.
  signature text not null,
  key_id text not null,
  primary key (tenant_id, seq)
);

-- Public badge tokens: only the SHA-256 of the token is stored. The label is the
-- creator's private note and is never rendered.
create table badge_tokens (
  id text primary key,
  tenant_id text not null references tenants(id),
  token_hash text not null unique,
  label text not null,
  created_at bigint not null,
  revoked_at bigint
);
create index badge_tokens_by_tenant on badge_tokens (tenant_id);

-- Scanner manifests, imported from signed files by the admin CLI (never over HTTP).
create table manifests (
  id bigint generated always as identity primary key,
  tenant_id text not null references tenants(id),
  repo_id text not null,
  commit_sha text not null,
  scanner_version text not null,
  created_at bigint not null,
  imported_at bigint not null,
  unique (tenant_id, repo_id, commit_sha, scanner_version, created_at)
);
create index manifests_latest on manifests (tenant_id, repo_id, created_at desc, id desc);
`
