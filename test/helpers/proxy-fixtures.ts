import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import type { SystemsFile } from '../../src/config/systems.js'
import type { Api } from './control-plane.js'

/** An enrolled-systems file routing the usual verbs to a loopback upstream. */
export function billingSystems(upstream: string, tenantId?: string): SystemsFile {
  return {
    passthrough: [],
    systems: [
      {
        systemId: 'sys_billing',
        kind: 'http',
        ...(tenantId ? { tenantId } : {}),
        upstream,
        credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'BILLING_TOKEN' },
        reads: 'pass',
        routes: [
          { method: 'POST', path: '/v1/refunds', verb: 'refund' },
          { method: 'POST', path: '/v1/verify', verb: 'verify' },
          { method: 'POST', path: '/v1/provision/{vm}', verb: 'provision', target: '{vm}' },
          { method: 'PUT', path: '/v1/upload*', verb: 'verify' },
          { method: 'POST', path: '/v1/stream*', verb: 'verify' },
          { method: 'DELETE', path: '/v1/customers/{id}', verb: 'admit', target: 'customer:{id}' },
          { method: 'GET', path: '/v1/secret-report', verb: 'verify' },
        ],
        tools: [],
      },
    ],
  }
}

export function writeRoutesFile(file: SystemsFile): string {
  const dir = mkdtempSync(join(tmpdir(), 'wg-routes-'))
  const path = join(dir, 'routes.yaml')
  writeFileSync(path, stringify(file))
  return path
}

/** Enrols a file's systems for the tenant of `adminKey` through `POST /v1/systems`, as an operator would. */
export async function enrolSystems(api: Api, adminKey: string, file: SystemsFile): Promise<void> {
  for (const { tenantId: _, ...system } of file.systems) {
    const r = await api.post('/v1/systems', system, { bearer: adminKey })
    if (r.status !== 201) throw new Error(`enrol ${system.systemId}: ${r.status} ${JSON.stringify(r.body)}`)
  }
}

/** Proxy settings that let it inject the test systems' credential (`BILLING_TOKEN`). */
export const BILLING_CREDENTIALS = { allowEnv: ['BILLING_TOKEN'] }
