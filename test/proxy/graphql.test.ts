import { buildSchema } from 'graphql'
import { createHandler } from 'graphql-http'
import t from 'tap'
import type { ManualClock } from '../../src/core/clock.js'
import { startBillingProxy } from '../helpers/billing-proxy.js'
import { agentRequest } from '../helpers/proxy.js'

/**
 * Issue 16: GraphQL mutations through gate-proxy, against a real GraphQL server (graphql-http
 * over the reference `graphql` executor). Every root mutation field is decided; one that is
 * not ALLOW refuses the whole request, which never reaches the server.
 */

const schema = buildSchema(`
  input CreateIssueInput { repositoryId: ID!, title: String! }
  type Issue { id: ID!, title: String! }
  type Query { viewer: String }
  type Mutation {
    createIssue(input: CreateIssueInput!): Issue
    closeIssue(id: ID!): Boolean
    deleteRepository(id: ID!): Boolean
    transferRepository(id: ID!, to: String!): Boolean
  }
`)

t.test('GraphQL mutations through gate-proxy', async (t) => {
  const executed: string[] = []
  const rootValue = {
    viewer: () => 'agent',
    createIssue: ({ input }: { input: { repositoryId: string; title: string } }) => {
      executed.push(`createIssue:${input.repositoryId}`)
      return { id: 'I_1', title: input.title }
    },
    closeIssue: ({ id }: { id: string }) => {
      executed.push(`closeIssue:${id}`)
      return true
    },
    deleteRepository: ({ id }: { id: string }) => {
      executed.push(`deleteRepository:${id}`)
      return true
    },
    transferRepository: () => {
      executed.push('transferRepository')
      return true
    },
  }
  const handle = createHandler({ schema, rootValue })
  const bench = await startBillingProxy(t, {
    systems: (origin) => ({
      passthrough: [],
      systems: [
        {
          systemId: 'sys_github',
          kind: 'graphql',
          upstream: origin,
          credential: { header: 'authorization', prefix: 'Bearer ', fromEnv: 'BILLING_TOKEN' },
          reads: 'pass',
          routes: [],
          tools: [],
          graphql: {
            endpoint: '/graphql',
            mutations: [
              { field: 'createIssue', verb: 'verify', target: '{input.repositoryId}' },
              { field: 'closeIssue', verb: 'refund', target: '{id}' },
              { field: 'delete*', verb: 'repo.delete' },
            ],
          },
        },
      ],
    }),
    verbs: ['repo.delete'],
  })
  bench.upstream.behaviour = async (req, res, body) => {
    const [text, init] = await handle({
      url: req.url ?? '/',
      method: req.method ?? 'GET',
      headers: req.headers,
      body: () => Promise.resolve(body.toString('utf8')),
      raw: req,
      context: undefined,
    })
    res.writeHead(init.status, init.statusText, init.headers as Record<string, string>).end(text)
  }
  const post = (payload: unknown, headers: Record<string, string> = {}) =>
    agentRequest(bench.port, {
      method: 'POST',
      path: '/sys_github/graphql',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
      body: JSON.stringify(payload),
    })
  const receipts = async () =>
    (
      await bench.cp.database!.sql<{ body: string }[]>`select body from receipts
        where tenant_id = ${bench.tenant.tenantId} and kind = 'CHECK' order by seq`
    ).map((r) => JSON.parse(r.body))

  t.test(
    'ALLOW: forwarded with the injected credential, the server runs it, a receipt says so',
    async (t) => {
      const r = await post({
        query: 'mutation($repo: ID!) { createIssue(input: {repositoryId: $repo, title: "x"}) { id } }',
        variables: { repo: 'R_1' },
      })
      t.equal(r.status, 200)
      t.same(r.json(), { data: { createIssue: { id: 'I_1' } } })
      t.match(r.headers['x-writegate-receipt'], /^rcp_/)
      t.same(executed, ['createIssue:R_1'])
      t.equal(bench.upstream.received.at(-1)?.headers.authorization, 'Bearer up-secret')
      t.match((await receipts()).at(-1), {
        decision: 'ALLOW',
        verb: 'verify',
        target: 'R_1',
        detail: { via: 'graphql', systemId: 'sys_github', graphql: { field: 'createIssue' } },
      })
    },
  )

  t.test(
    "variables: a default fills one not sent, only the request's own count; the receipt names what ran",
    async (t) => {
      const create = (variable: string, value: string) =>
        `mutation($${variable}: ID = "${value}") { createIssue(input: {repositoryId: $${variable}, title: "x"}) { id } }`
      const cases: [string, unknown, string][] = [
        ['a default, no variables sent', { query: create('repo', 'R_default') }, 'R_default'],
        // Read through a prototype, these gave Object's functions: a receipt with no target.
        ['a default named constructor', { query: create('constructor', 'R_ctor'), variables: {} }, 'R_ctor'],
        [
          'one named toString, sent',
          { query: create('toString', 'R_x'), variables: { toString: 'R_sent' } },
          'R_sent',
        ],
      ]
      for (const [name, payload, repo] of cases) {
        const r = await post(payload)
        t.same(r.json(), { data: { createIssue: { id: 'I_1' } } }, name)
        t.equal(executed.at(-1), `createIssue:${repo}`, `${name}: what the server ran`)
        t.match(
          (await receipts()).at(-1),
          { decision: 'ALLOW', target: repo },
          `${name}: what the receipt says`,
        )
      }
      const step = await post({ query: 'mutation($id: ID = "I_default") { closeIssue(id: $id) }' })
      t.equal(step.json().errors[0].extensions.decision, 'STEP_UP')
      t.match(
        (await receipts()).at(-1),
        { decision: 'STEP_UP', target: 'I_default' },
        'staged under its default',
      )
      const listed = await bench.api.get('/v1/receipts?limit=1000', { bearer: bench.tenant.apiKey })
      t.equal(listed.status, 200, 'every receipt can be served')
      t.ok(
        listed.body.receipts.every(
          (r: { target?: unknown }) => r.target === null || typeof r.target === 'string',
        ),
      )
    },
  )

  t.test('queries are reads: they pass', async (t) => {
    const r = await post({ query: '{ viewer }' })
    t.same(r.json(), { data: { viewer: 'agent' } })
  })

  t.test('DENY: a GraphQL error document with the receipt; the server never sees it', async (t) => {
    const before = bench.upstream.received.length
    const r = await post({ query: 'mutation { deleteRepository(id: "R_1") }' })
    t.equal(r.status, 200)
    t.match(r.json(), {
      data: null,
      errors: [
        {
          message: /denied by writegate: deleteRepository/,
          extensions: {
            code: 'denied',
            decision: 'DENY',
            verb: 'repo.delete',
            reason: 'policy_deny',
            receiptId: /^rcp_/,
          },
        },
      ],
    })
    t.equal(bench.upstream.received.length, before)
    t.notOk(executed.includes('deleteRepository:R_1'))
  })

  t.test(
    'smuggling: aliases, fragments, operation names, batches and extra fields cannot slip a write past',
    async (t) => {
      const before = bench.upstream.received.length
      const attempts: [string, unknown][] = [
        ['an alias', { query: 'mutation { harmless: deleteRepository(id: "R_2") }' }],
        [
          'a named fragment',
          { query: 'mutation { ...F } fragment F on Mutation { deleteRepository(id: "R_2") }' },
        ],
        ['an inline fragment', { query: 'mutation { ... on Mutation { deleteRepository(id: "R_2") } }' }],
        [
          'operationName naming the harmless operation',
          {
            query:
              'mutation A { createIssue(input: {repositoryId: "R", title: "t"}) { id } } mutation B { deleteRepository(id: "R_2") }',
            operationName: 'A',
          },
        ],
        [
          'two root fields',
          {
            query:
              'mutation { createIssue(input: {repositoryId: "R", title: "t"}) { id } deleteRepository(id: "R_2") }',
          },
        ],
        ['a batch', [{ query: '{ viewer }' }, { query: 'mutation { deleteRepository(id: "R_2") }' }]],
        [
          'a variable-less literal in a nested fragment',
          {
            query:
              'mutation { ... on Mutation { ...G } } fragment G on Mutation { deleteRepository(id: "R_2") }',
          },
        ],
      ]
      for (const [name, payload] of attempts) {
        const r = await post(payload)
        t.match(r.json().errors?.[0]?.extensions, { decision: 'DENY', verb: 'repo.delete' }, name)
      }
      const unmapped = await post({ query: 'mutation { transferRepository(id: "R_2", to: "evil") }' })
      t.match(
        unmapped.json().errors[0].extensions,
        { code: 'unmapped_call', field: 'transferRepository' },
        'an unmapped field',
      )
      const get = await agentRequest(bench.port, {
        method: 'GET',
        path: `/sys_github/graphql?query=${encodeURIComponent('mutation { deleteRepository(id: "R_2") }')}`,
      })
      t.match(
        get.json().errors[0],
        { message: /a mutation sent by GET/, extensions: { code: 'unreadable_call' } },
        'by GET',
      )
      // A body on a read at the endpoint goes unread by the gate: refused, never sent (found in review).
      const mutation = JSON.stringify({ query: 'mutation { deleteRepository(id: "R_2") }' })
      for (const method of ['GET', 'OPTIONS']) {
        const before = bench.upstream.received.length
        const withBody = await agentRequest(bench.port, {
          method,
          path: `/sys_github/graphql?query=${encodeURIComponent('{ viewer }')}`,
          // Node's client frames no body of a GET or OPTIONS by itself.
          headers: { 'content-type': 'application/json', 'content-length': String(mutation.length) },
          body: mutation,
        })
        t.same([withBody.status, withBody.json().code], [403, 'unmapped_route'], `a body on a ${method}`)
        t.equal(bench.upstream.received.length, before, `the ${method} with a body never reached the server`)
      }
      const persisted = await post({
        extensions: { persistedQuery: { version: 1, sha256Hash: 'a'.repeat(64) } },
      })
      t.match(persisted.json().errors[0], {
        message: /persisted query/,
        extensions: { code: 'unreadable_call' },
      })
      const broken = await post({ query: 'mutation { deleteRepository(id: ' })
      t.match(
        broken.json().errors[0].extensions,
        { code: 'unreadable_call' },
        'a document that does not parse',
      )
      // JSON.parse keeps the last `query`, a read; a server keeping the first runs the mutation.
      const twice = await agentRequest(bench.port, {
        method: 'POST',
        path: '/sys_github/graphql',
        headers: { 'content-type': 'application/json' },
        body: '{"query":"mutation { deleteRepository(id: \\"R_2\\") }","query":"{ viewer }"}',
      })
      t.match(
        twice.json().errors[0],
        { message: /member "query" appears twice/, extensions: { code: 'unreadable_call' } },
        'a member given twice',
      )
      // Rails runs a HEAD as its GET, and Rack reads `[query]` in the URL as `query`.
      await agentRequest(bench.port, {
        method: 'HEAD',
        path: `/sys_github/graphql?query=${encodeURIComponent('mutation { deleteRepository(id: "R_2") }')}`,
      })
      const bracketed = await agentRequest(bench.port, {
        method: 'POST',
        path: `/sys_github/graphql?%5Bquery%5D=${encodeURIComponent('mutation { deleteRepository(id: "R_2") }')}`,
        headers: { 'content-type': 'application/json' },
        body: '{"query":"{ viewer }"}',
      })
      t.match(
        bracketed.json().errors[0].extensions,
        { code: 'unreadable_call' },
        'a bracketed parameter name',
      )
      // Found in review: ASP.NET Core reads URL parameter names regardless of case, and GraphQL.NET
      // prefers the URL's query and variables to the body's, on a POST too.
      const deleteInUrl = encodeURIComponent('mutation { deleteRepository(id: "R_2") }')
      for (const search of [
        `QUERY=${deleteInUrl}`,
        `%51uery=${deleteInUrl}`,
        `Variables=${encodeURIComponent('{"id":"R_2"}')}`,
        'DocumentId=abc',
        // ſ folds onto S and ı onto I one way only (toUpperCase), as .NET's OrdinalIgnoreCase may.
        `variable%C5%BF=${encodeURIComponent('{"id":"R_2"}')}`,
        `var%C4%B1ables=${encodeURIComponent('{"id":"R_2"}')}`,
        'id=abc',
      ]) {
        const cased = await agentRequest(bench.port, {
          method: 'POST',
          path: `/sys_github/graphql?${search}`,
          headers: { 'content-type': 'application/json' },
          body: '{"query":"{ viewer }"}',
        })
        t.match(
          cased.json().errors[0],
          { message: /in its URL|regardless of case/, extensions: { code: 'unreadable_call' } },
          search,
        )
      }
      for (const search of [
        `query=${encodeURIComponent('{ viewer }')}&Query=${deleteInUrl}`,
        `QUERY=${deleteInUrl}`,
      ]) {
        const get = await agentRequest(bench.port, { method: 'GET', path: `/sys_github/graphql?${search}` })
        t.match(
          get.json().errors[0],
          { message: /regardless of case/, extensions: { code: 'unreadable_call' } },
          search,
        )
      }
      const byId = await post({ query: '{ viewer }', documentId: 'sha256:abc' })
      t.match(byId.json().errors[0], { message: /persisted query/ }, 'a document id beside a query')
      // graphql-js keeps a comment going through U+2028; graphql-java before 14 ended it there.
      const separator = await post({
        query: 'query Q { viewer } #\u2028mutation M { deleteRepository(id: "R_2") }',
        operationName: 'Q',
      })
      t.match(separator.json().errors[0], { message: /U\+2028/ }, 'a line separator in a comment')
      const raw = await agentRequest(bench.port, {
        method: 'POST',
        path: '/sys_github/graphql',
        headers: { 'content-type': 'application/graphql' },
        body: 'mutation { deleteRepository(id: "R_2") }',
      })
      t.match(raw.json().errors[0].extensions, { decision: 'DENY' }, 'an application/graphql body')
      t.equal(bench.upstream.received.length, before, 'none of them reached the server')
      t.notOk(executed.some((e) => e.startsWith('deleteRepository') || e === 'transferRepository'))
    },
  )

  t.test('STEP_UP: staged, refused with the action id, and replayed exactly on approval', async (t) => {
    const payload = JSON.stringify({ query: 'mutation { closeIssue(id: "I_9") }' })
    const r = await agentRequest(bench.port, {
      method: 'POST',
      path: '/sys_github/graphql',
      headers: { 'content-type': 'application/json' },
      body: payload,
    })
    const ext = r.json().errors[0].extensions
    t.match(ext, { code: 'step_up_required', decision: 'STEP_UP', actionId: /^act_/, receiptId: /^rcp_/ })
    t.notOk(executed.includes('closeIssue:I_9'))
    const approved = await bench.approve(ext.actionId)
    t.same([approved.status, approved.body.type], [200, 'executed'], JSON.stringify(approved.body))
    t.same(approved.body.result.body, { data: { closeIssue: true } })
    t.same(
      executed.filter((e) => e === 'closeIssue:I_9'),
      ['closeIssue:I_9'],
      'run once, on approval',
    )
    const sent = bench.upstream.received.at(-1)
    t.same(
      [sent?.url, sent?.body.toString(), sent?.headers.authorization],
      ['/graphql', payload, 'Bearer up-secret'],
    )
  })

  t.test('an approved write whose answer nests too deep is reported with the answer as text', async (t) => {
    const r = await post({ query: 'mutation { closeIssue(id: "I_deep") }' })
    const { actionId } = r.json().errors[0].extensions
    const normal = bench.upstream.behaviour
    t.teardown(() => {
      bench.upstream.behaviour = normal
    })
    const deep = `{"data":{"closeIssue":${'['.repeat(10_000)}${']'.repeat(10_000)}}}`
    bench.upstream.behaviour = async (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(deep)
    }
    // The previous approval spent this window's code.
    ;(bench.cp.clock as ManualClock).advance(30_000)
    const approved = await bench.approve(actionId)
    // Parsed, it could not be serialised back: the write was made, and the approver must hear so.
    t.same([approved.status, approved.body.type], [200, 'executed'])
    t.equal(approved.body.result.body, deep)
  })

  t.test('a STEP_UP field among other writes cannot be staged alone: refused, nothing staged', async (t) => {
    const r = await post({
      query: 'mutation { closeIssue(id: "I_8") createIssue(input: {repositoryId: "R", title: "t"}) { id } }',
    })
    t.match(r.json().errors[0], {
      message: /send it as the request's only mutation/,
      extensions: { decision: 'STEP_UP', actionId: null },
    })
    t.notOk(executed.includes('closeIssue:I_8'))
  })
})
