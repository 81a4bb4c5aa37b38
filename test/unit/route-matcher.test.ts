import t from 'tap'
import { systemsFileSchema } from '../../src/config/systems.js'
import { RouteTable } from '../../src/proxy/route-table.js'
import { compileRoutes } from '../../src/systems/route-matcher.js'

const file = systemsFileSchema.parse({
  systems: [
    {
      systemId: 'sys_gh',
      upstream: 'https://api.example.test',
      routes: [
        {
          method: 'PUT',
          path: '/repos/{owner}/{repo}/contents/{path}',
          verb: 'repo.write',
          target: '{owner}/{repo}',
        },
        { method: 'POST', path: '/v1/admin*', verb: 'admin.write' },
        { method: 'POST', path: '/v1/refunds/', verb: 'refund.create' },
        { method: 'POST', path: '/v1/refunds', verb: 'refund.shadowed' },
        { method: 'DELETE', path: '/v1/a.b+c', verb: 'literal.delete' },
        { method: 'GET', path: '/v1/reports/{id}', verb: 'report.read' },
        { method: 'GET', path: '/v1/exports', verb: 'export.read' },
        { method: 'HEAD', path: '/v1/exports', verb: 'export.probe' },
      ],
    },
  ],
})

const cases: [string, string, { verb: string; target: string | null } | null][] = [
  ['PUT', '/repos/acme/site/contents/README.md', { verb: 'repo.write', target: 'acme/site' }],
  ['PUT', '/REPOS/acme/site/CONTENTS/x', { verb: 'repo.write', target: 'acme/site' }],
  ['PUT', '/repos/ac%20me/site/contents/x?ref=main', { verb: 'repo.write', target: 'ac me/site' }],
  ['PUT', '/repos/acme/site/contents/a/b', null],
  ['POST', '/v1/admin', { verb: 'admin.write', target: null }],
  ['POST', '/v1/admin/users/1', { verb: 'admin.write', target: null }],
  ['POST', '/v1/adminXYZ', null],
  ['POST', '/v1/refunds', { verb: 'refund.create', target: null }],
  ['POST', '/v1/Refunds/', { verb: 'refund.create', target: null }],
  ['GET', '/v1/refunds', null],
  ['DELETE', '/v1/a.b+c', { verb: 'literal.delete', target: null }],
  ['DELETE', '/v1/aXb+c', null],
  ['DELETE', '/v1/a.bbc', null],
  // HEAD runs the upstream's GET handler, so it is gated as that GET unless it has its own route.
  ['HEAD', '/v1/reports/7', { verb: 'report.read', target: null }],
  ['HEAD', '/v1/exports', { verb: 'export.probe', target: null }],
  ['HEAD', '/v1/refunds', null],
]

t.test(
  'routes map a request to its verb: lenient case and slash, boundary wildcard, first route wins',
  async (t) => {
    const matcher = compileRoutes(file.systems[0]?.routes ?? [])
    for (const [method, path, want] of cases) t.same(matcher.match(method, path), want, `${method} ${path}`)
  },
)

t.test('the proxy and /v1/check map every request identically', async (t) => {
  const table = new RouteTable(file, {}, { upstreamTimeoutMs: 30_000 })
  const system = table.system('sys_gh')
  if (!system) throw new Error('sys_gh not in the route table')
  const matcher = compileRoutes(file.systems[0]?.routes ?? [])
  for (const [method, path] of cases)
    t.same(table.match(system, method, path), matcher.match(method, path), `${method} ${path}`)
  table.close()
})
