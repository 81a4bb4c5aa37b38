import t from 'tap'
import { mapGraphqlCall, readGraphqlRequest } from '../../src/proxy/graphql-calls.js'
import { readMcpRequest } from '../../src/proxy/mcp-calls.js'

/** What the MCP and GraphQL readers make of requests built to confuse them. */

const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`

const mcp = (body: string) => readMcpRequest({ contentType: 'application/json', body: Buffer.from(body) })
const toolCall = (args: string) =>
  `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":${args}}}`

t.test('MCP: a message nested past 64 levels is unreadable; one within is read', async (t) => {
  t.match(mcp(toolCall(`{"a":${nested(10_000)}}`)), { ok: false, problem: /deeper than 64 levels/ })
  t.match(mcp(toolCall(`{"a":${nested(65)}}`)), { ok: false })
  t.match(mcp(toolCall(`{"a":${nested(50)}}`)), { ok: true, calls: [{ tool: 't' }] })
})

const graphql = (body: string, method = 'POST', pathWithQuery = '/graphql') =>
  readGraphqlRequest({ method, pathWithQuery, contentType: 'application/json', body: Buffer.from(body) })
const binding = {
  endpoint: '/graphql',
  mutations: [{ field: 'closeIssue', verb: 'refund', target: '{id}' }],
}
const targetOf = (body: string): unknown => {
  const r = graphql(body)
  if (!r.ok) return r.problem
  const call = r.mutations[0]
  return call ? mapGraphqlCall(binding, call)?.target : 'no mutation'
}

t.test("GraphQL: a variable is the request's own, else its default, else absent", async (t) => {
  const close = (v: string, def = '') => `mutation($${v}: ID${def}) { closeIssue(id: $${v}) }`
  t.equal(targetOf(JSON.stringify({ query: close('id'), variables: { id: 'I_1' } })), 'I_1')
  t.equal(targetOf(JSON.stringify({ query: close('id', ' = "I_d"') })), 'I_d', 'the default, none sent')
  t.equal(
    targetOf(JSON.stringify({ query: close('id', ' = "I_d"'), variables: { id: null } })),
    null,
    'null sent is null, not the default',
  )
  for (const name of ['constructor', 'toString', 'hasOwnProperty', 'valueOf']) {
    t.equal(
      targetOf(JSON.stringify({ query: close(name), variables: {} })),
      null,
      `${name}: not a prototype's`,
    )
    t.equal(targetOf(JSON.stringify({ query: close(name, ' = "I_d"') })), 'I_d', `${name}: its default`)
  }
  // Written by hand: JSON.parse makes `__proto__` an own key, as a server's parser does.
  t.equal(
    targetOf(
      `{"query":"mutation($__proto__: ID) { closeIssue(id: $__proto__) }","variables":{"__proto__":"I_p"}}`,
    ),
    'I_p',
  )
  t.equal(targetOf(JSON.stringify({ query: close('__proto__', ' = "I_d"') })), 'I_d')
  t.equal(
    targetOf(
      JSON.stringify({ query: 'mutation { closeIssue(id: $undefined) }', variables: { undefined: 'I_u' } }),
    ),
    null,
    'a variable the operation does not define has no value (a server refuses the document)',
  )
  t.equal(
    targetOf(
      JSON.stringify({
        query: 'mutation M($id: ID = "I_m") { ...F } fragment F on Mutation { closeIssue(id: $id) }',
      }),
    ),
    'I_m',
    "a fragment reads its operation's variables",
  )
  const args = graphql('{"query":"mutation { closeIssue(__proto__: \\"x\\", id: \\"I_a\\") }"}')
  t.ok(
    args.ok && Object.hasOwn(args.mutations[0]?.args ?? {}, '__proto__'),
    'an argument named __proto__ is one',
  )
})

t.test('GraphQL: variables nested past 64 levels are unreadable, by POST or GET', async (t) => {
  t.match(graphql(`{"query":"mutation { closeIssue(id: 1) }","variables":{"a":${nested(10_000)}}}`), {
    ok: false,
    problem: /deeper than 64 levels/,
  })
  const get = graphql(
    '',
    'GET',
    `/graphql?query=${encodeURIComponent('{ viewer }')}&variables=${encodeURIComponent(`{"a":${nested(10_000)}}`)}`,
  )
  t.match(get, { ok: false, problem: /deeper than 64 levels/ })
  t.match(graphql(`{"query":"{ viewer }","variables":{"a":${nested(40)}}}`), { ok: true, reads: 1 })
})
