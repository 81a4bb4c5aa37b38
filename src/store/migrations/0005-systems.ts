/**
 * Enrolled systems as decision state: one row per system of a tenant, its definition (the
 * upstream, a credential *reference*, routes and tools) as JSON, versioned. A deleted system is
 * a tombstone, so its id is never reused within the tenant.
 */
export const up = /* sql */ `
create table systems (
  tenant_id text not null references tenants(id),
  system_id text not null,
  version integer not null,
  definition jsonb not null,
  created_at bigint not null,
  updated_at bigint not null,
  deleted_at bigint,
  primary key (tenant_id, system_id)
);
-- Snapshots now carry systems: every tenant's version moves on, so the hot store's copies
-- (built before this column existed) are republished at start rather than trusted.
update tenants set version = version + 1;
`
