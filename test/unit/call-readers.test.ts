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

t.test(
  'a call holding a string Postgres cannot store is unreadable, not forwarded unlogged (found in review)',
  async (t) => {
    t.match(mcp(toolCall('{"repo":"a\\u0000b"}')), { ok: false, problem: /NUL/ })
    t.match(
      mcp('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t\\u0000","arguments":{}}}'),
      {
        ok: false,
        problem: /NUL/,
      },
    )
    t.match(mcp(toolCall('{"repo":"a b"}')), { ok: true })
    const variable = JSON.stringify({
      query: 'mutation($id: ID!){ closeIssue(id: $id) { id } }',
      variables: { id: 'a\u0000b' },
    })
    t.match(graphql(variable), { ok: false, problem: /closeIssue: .*NUL/ })
    const literal = JSON.stringify({ query: 'mutation{ closeIssue(id: "c\\u0000d") { id } }' })
    t.match(graphql(literal), { ok: false, problem: /NUL/ })
    t.match(graphql(JSON.stringify({ query: 'mutation{ closeIssue(id: "cd") { id } }' })), { ok: true })
  },
)

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

t.test(
  'GraphQL: literals in the document nested past 64 levels are unreadable (found in review)',
  async (t) => {
    const doc = (query: string) => graphql(JSON.stringify({ query }))
    const list = (depth: number) => `${'['.repeat(depth)}"a"${']'.repeat(depth)}`
    const object = (depth: number) => `${'{a:'.repeat(depth)}1${'}'.repeat(depth)}`
    for (const [name, query] of [
      ['a list argument', `mutation { noop(x: ${list(1_000)}) }`],
      ['an input object argument', `mutation { noop(input: ${object(1_000)}) }`],
      ['just past the line', `mutation { noop(x: ${list(65)}) }`],
      ["a variable's default", `mutation M($x: [String] = ${list(1_000)}) { noop(x: $x) }`],
      ['a literal holding a deep variable', 'mutation M($v: JSON) { noop(x: [[[[[$v]]]]]) }'],
    ] as const) {
      // The variable alone is within the line (the body nests 62 levels); in the literal, it is not.
      const read = graphql(JSON.stringify({ query, variables: { v: JSON.parse(list(60)) } }))
      t.match(read, { ok: false, problem: /deeper than 64 levels/ }, name)
    }
    t.match(
      graphql(
        JSON.stringify({
          query: 'mutation M($v: JSON) { noop(x: $v) }',
          variables: { v: JSON.parse(list(60)) },
        }),
      ),
      { ok: true },
      'the same variable on its own is read',
    )
    // Reading one never throws (it was a stack overflow, answered 503 gate_unavailable).
    const mapped = doc(`mutation { noop(x: ${list(64)}) }`)
    t.match(mapped, { ok: true }, 'a literal within the line is read')
    if (mapped.ok)
      t.match(
        mapGraphqlCall(
          { endpoint: '/graphql', mutations: [{ field: 'noop', verb: 'v', target: '{x}' }] },
          mapped.mutations[0] as never,
        ),
        { verb: 'v' },
      )
  },
)

t.test(
  'GraphQL: a fragment defined twice is refused (servers refuse it; one would run the first)',
  async (t) => {
    const read = graphql(
      JSON.stringify({
        query:
          'mutation { ...F } fragment F on Mutation { deleteRepository(id: "R") } fragment F on Mutation { __typename }',
      }),
    )
    t.match(read, { ok: false, problem: /fragment F is defined twice/ })
  },
)

// Found in review: ways a server could read the same bytes as another request than the gate did.

t.test('only a UTF-8 body is read: a server decoding UTF-7 would find another message', async (t) => {
  // As UTF-7 this is a tools/call of delete_repository; as UTF-8 a tools/list with a string param.
  const body = Buffer.from(
    '{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"x":"+ACIAfQ-,+ACI-method+ACI-:+ACI-tools/call+ACI-"}}',
  )
  for (const charset of ['utf-7', 'UTF-16', 'latin1', '"utf-7"'])
    t.match(
      readMcpRequest({ contentType: `application/json; charset=${charset}`, body }),
      { ok: false, problem: /charset/ },
      `MCP, charset=${charset}: refused`,
    )
  for (const charset of ['utf-8', 'UTF-8', 'utf8'])
    t.match(readMcpRequest({ contentType: `application/json; charset=${charset}`, body }), { ok: true })
  t.match(readMcpRequest({ contentType: 'application/json', body }), { ok: true }, 'no charset: UTF-8')
  const query = Buffer.from('{"query":"{ viewer }"}')
  t.match(
    readGraphqlRequest({
      method: 'POST',
      pathWithQuery: '/graphql',
      contentType: 'application/json; charset=utf-7',
      body: query,
    }),
    { ok: false, problem: /charset/ },
    'GraphQL, charset=utf-7: refused',
  )
})

t.test(
  'a GraphQL POST is read only as JSON or application/graphql, and never with URL parameters',
  async (t) => {
    const body = Buffer.from('{"x":"&query=mutation{deleteRepository(id:1)}&","query":"{viewer}"}')
    for (const type of [
      'application/x-www-form-urlencoded',
      'text/plain',
      'multipart/form-data; boundary=x',
      'application/jsonx',
    ])
      t.match(
        readGraphqlRequest({ method: 'POST', pathWithQuery: '/graphql', contentType: type, body }),
        { ok: false },
        `${type}: refused`,
      )
    t.match(
      readGraphqlRequest({
        method: 'POST',
        pathWithQuery: '/graphql',
        contentType: 'application/json',
        body,
      }),
      {
        ok: true,
      },
    )
    for (const param of ['query=mutation%7Bx%7D', 'variables=%7B%7D', 'operationName=A', 'extensions=%7B%7D'])
      t.match(
        graphql('{"query":"{ viewer }"}', 'POST', `/graphql?${param}`),
        { ok: false, problem: /URL/ },
        `POST with ?${param}: refused`,
      )
    t.match(
      graphql('{"query":"{ viewer }"}', 'POST', '/graphql?tenant=1'),
      { ok: true },
      'another URL parameter: read',
    )
  },
)

t.test(
  'GraphQL variables must be an object: a string one would be parsed by some servers only',
  async (t) => {
    const doc = 'mutation($id: ID = \\"R_sandbox\\") { createIssue(id: $id) }'
    t.match(graphql(`{"query":"${doc}","variables":"{\\"id\\":\\"R_prod\\"}"}`), {
      ok: false,
      problem: /variables/,
    })
    t.match(graphql(`{"query":"${doc}","variables":[1]}`), { ok: false, problem: /variables/ })
    t.match(graphql(`{"query":"${doc}","variables":null}`), { ok: true })
    t.match(graphql('{ viewer }', 'GET', '/graphql?query=%7Bviewer%7D&variables=%22x%22'), {
      ok: false,
      problem: /variables/,
    })
  },
)

t.test(
  'a request reads at most 100,000 selections, its fragments read again per operation (found in review)',
  async (t) => {
    // 400 mutation operations, each spreading one fragment of 300 spreads: 120,000 selections
    // to read (it was 4,000 by 2,800, read for 2.9 s on the proxy's one thread).
    const spreads = Array.from({ length: 300 }, (_, i) => `...b${i}`).join(' ')
    const leaves = Array.from({ length: 300 }, (_, i) => `fragment b${i} on Mutation{__typename}`).join(' ')
    const ops = (n: number) => Array.from({ length: n }, (_, i) => `mutation m${i}{...A}`).join(' ')
    const doc = (n: number) => `${ops(n)} fragment A on Mutation{${spreads}} ${leaves}`
    t.match(graphql(JSON.stringify({ query: doc(200) })), { ok: false, problem: /at most 100000 selections/ })
    t.match(graphql(JSON.stringify({ query: doc(100) })), { ok: true, mutations: [] }, 'under it, read')
    // Over a batch as well: documents share the one budget.
    const batch = Array.from({ length: 2 }, () => ({ query: doc(100) }))
    t.match(graphql(JSON.stringify(batch)), { ok: false, problem: /at most 100000 selections/ })
  },
)

t.test(
  "a request's arguments hold at most 1,000,000 values, a variable counted at each reference (found in review)",
  async (t) => {
    // `[$v $v …]` substitutes the whole variable at each reference: 2,000 references to 20,000
    // values were read, checked and templated 2,000 times over (12 s on the proxy's one thread
    // for 104 KB; minutes at the body limit).
    const refs = (n: number) => Array.from({ length: n }, () => '$v').join(' ')
    const request = (n: number, size: number) =>
      JSON.stringify({
        query: `mutation($v:[Int]){closeIssue(id:"1", a:[${refs(n)}])}`,
        variables: { v: Array.from({ length: size }, () => 1) },
      })
    t.match(graphql(request(2_000, 20_000)), { ok: false, problem: /more than 1000000 values/ })
    t.match(graphql(request(3, 400_000)), { ok: false, problem: /more than 1000000 values/ })
    // A large variable read once or twice (a bulk import) is within it.
    const read = graphql(request(2, 400_000))
    t.match(read, { ok: true })
    const args = read.ok ? (read.mutations[0]?.args.a as unknown[][] | undefined) : undefined
    t.equal(args?.[1]?.length, 400_000)
    // The budget is the request's, over every mutation field that references the variable.
    const fields = Array.from({ length: 30 }, (_, i) => `f${i}:closeIssue(id:"1", a:$v)`).join(' ')
    const spread = JSON.stringify({
      query: `mutation($v:[Int]){${fields}}`,
      variables: { v: Array.from({ length: 40_000 }, () => 1) },
    })
    t.match(graphql(spread), { ok: false, problem: /more than 1000000 values/ })
    // A string costs one value per 16 characters, and so does a key: copies of a 100 KB string
    // are each scanned and templated whole (found in review: 600 KB × 24,000 references ran the
    // proxy out of memory).
    const long = 'x'.repeat(100_000)
    const strings = (n: number, v: unknown) =>
      JSON.stringify({ query: `mutation($v:[Int]){closeIssue(id:"1", a:[${refs(n)}])}`, variables: { v } })
    t.match(graphql(strings(200, long)), { ok: false, problem: /more than 1000000 values/ })
    t.match(graphql(strings(200, { [long]: 1 })), { ok: false, problem: /more than 1000000 values/ })
    t.match(graphql(strings(100, long)), { ok: true }, 'a hundred copies are within it')
    const literal = `"${'y'.repeat(100_000)}"`
    t.match(
      graphql(
        JSON.stringify({ query: `mutation($v:String=${literal}){closeIssue(id:"1", a:[${refs(200)}])}` }),
      ),
      { ok: false, problem: /more than 1000000 values/ },
    )
    // A default value counts as the variable it stands for.
    const defaulted = `[${Array.from({ length: 2_000 }, () => '1').join(',')}]`
    t.match(
      graphql(
        JSON.stringify({ query: `mutation($v:[Int]=${defaulted}){closeIssue(id:"1", a:[${refs(600)}])}` }),
      ),
      { ok: false, problem: /more than 1000000 values/ },
    )
  },
)

t.test('fragments spread again add nothing, and a request holds at most 32 mutation fields', async (t) => {
  // Each fragment spreads the one before twice: 2^26 fields if every spread were walked.
  let doc = 'mutation{...F26} fragment F0 on Mutation{createIssue(id:"R1")}'
  for (let i = 1; i <= 26; i++) doc += ` fragment F${i} on Mutation{...F${i - 1} ...F${i - 1}}`
  const read = graphql(JSON.stringify({ query: doc }))
  t.match(read, { ok: true }, 'read in one pass')
  t.equal(read.ok && read.mutations.length, 1, 'one field: the one the server runs')
  const many = `mutation{${Array.from({ length: 33 }, (_, i) => `a${i}:createIssue(id:"R${i}")`).join(' ')}}`
  t.match(graphql(JSON.stringify({ query: many })), { ok: false, problem: /at most 32/ })
  const enough = `mutation{${Array.from({ length: 32 }, (_, i) => `a${i}:createIssue(id:"R${i}")`).join(' ')}}`
  t.match(graphql(JSON.stringify({ query: enough })), { ok: true })
})

t.test(
  'a member that differs from a protocol member only by case is refused (Go decoders match it)',
  async (t) => {
    t.match(
      mcp(
        '{"jsonrpc":"2.0","id":1,"method":"tools/list","METHOD":"tools/call","params":{"name":"delete_repo"}}',
      ),
      { ok: false, problem: /"METHOD" differ only by letter case/ },
    )
    t.match(
      mcp(
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_issue","Name":"delete_repo"}}',
      ),
      { ok: false, problem: /"Name" differ only by letter case/ },
    )
    t.match(mcp('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{}}}'), {
      ok: true,
    })
    t.match(graphql('{"query":"{ viewer }","QUERY":"mutation { deleteRepository(id: 1) }"}'), {
      ok: false,
      problem: /QUERY differs/,
    })
    t.match(graphql('{"query":"{ viewer }","operationname":"A"}'), { ok: false })
  },
)

// Found in a second review of the fixes above.
t.test("case variants are folded as Go folds them ('ſ' is 's' there)", async (t) => {
  t.match(
    mcp(
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"refund","arguments":{"amount":1},"argumentſ":{"amount":1000000}}}',
    ),
    { ok: false, problem: /"argumentſ" differ only by letter case/ },
  )
  // With no `arguments` beside it: the gate reads a call with none, Go the variant's.
  t.match(
    mcp(
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"refund","argumentſ":{"amount":1000000}}}',
    ),
    { ok: false, problem: /argumentſ differs/ },
  )
  t.match(graphql('{"query":"{ viewer }","variableſ":{}}'), { ok: false })
  // Inside arguments too: mcp-go binds them to a struct, matching names regardless of case.
  t.match(mcp(toolCall('{"accountId":"1","accountid":"2"}')), {
    ok: false,
    problem: /"accountId" and "accountid" differ only by letter case/,
  })
  t.match(mcp(toolCall('{"a":{"K":1},"b":{"\u212a":2}}')), { ok: true }, 'in different objects')
})

t.test('a charset named twice, or unreadably, is refused (parsers disagree on which counts)', async (t) => {
  const body = Buffer.from('{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
  for (const type of ['application/json; charset=utf-8; charset=utf-7', 'application/json; charset = utf-7'])
    t.match(readMcpRequest({ contentType: type, body }), { ok: false, problem: /charset/ }, type)
  t.match(
    readGraphqlRequest({
      method: 'POST',
      pathWithQuery: '/graphql',
      contentType: 'application/graphql+json',
      body: Buffer.from('{"query":"{ viewer }"}'),
    }),
    { ok: true },
    'application/graphql+json is JSON',
  )
})

t.test(
  'a body two JSON parsers could read differently is refused (RapidJSON and simdjson keep the first member)',
  async (t) => {
    // JSON.parse keeps the last `method`: a read to the gate, a tool call to a first-member server.
    t.match(
      mcp(
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_repo"},"method":"tools/list"}',
      ),
      {
        ok: false,
        problem: /member "method" appears twice/,
      },
    )
    t.match(mcp(toolCall('{"amount":1000000,"amount":1}')), {
      ok: false,
      problem: /member "amount" appears twice/,
    })
    t.match(mcp(toolCall('{"id":12345678901234567891}')), { ok: false, problem: /not exactly a double/ })
    t.match(mcp(toolCall('{"note":"\\ud800"}')), { ok: false, problem: /unpaired surrogate/ })
    t.match(
      mcp(toolCall('{"a":{"n":1},"b":{"n":2},"id":9007199254740992}')),
      { ok: true },
      'names repeat across objects',
    )
    t.match(graphql('{"query":"mutation { deleteRepository(id: 1) }","query":"{ viewer }"}'), {
      ok: false,
      problem: /member "query" appears twice/,
    })
    t.match(
      graphql('{"query":"mutation($id: ID!) { closeIssue(id: $id) }","variables":{"id":"I_1","id":"I_2"}}'),
      {
        ok: false,
      },
    )
    t.match(
      graphql(
        '',
        'GET',
        `/graphql?query=${encodeURIComponent('query($v: Int) { a(v: $v) }')}&variables=${encodeURIComponent('{"v":1,"v":2}')}`,
      ),
      { ok: false, problem: /member "v" appears twice/ },
      'GET variables',
    )
    t.match(
      graphql(
        '',
        'GET',
        `/graphql?query=${encodeURIComponent('{ viewer }')}&query=${encodeURIComponent('mutation { deleteRepository(id: 1) }')}`,
      ),
      { ok: false, problem: /gives query more than once/ },
      'a URL parameter given twice',
    )
  },
)

t.test(
  'GraphQL: an argument or input field given twice, or an inexact number literal, is refused',
  async (t) => {
    const doc = (q: string) => JSON.stringify({ query: q })
    t.match(graphql(doc('mutation { closeIssue(id: "I_1", id: "I_2") }')), {
      ok: false,
      problem: /argument id is given twice/,
    })
    t.match(graphql(doc('mutation { closeIssue(input: {id: "I_1", id: "I_2"}) }')), {
      ok: false,
      problem: /input field id is given twice/,
    })
    t.match(graphql(doc('mutation { closeIssue(id: 12345678901234567891) }')), {
      ok: false,
      problem: /not exactly a double/,
    })
    t.match(graphql(doc('mutation { closeIssue(id: 1.5e400) }')), {
      ok: false,
      problem: /not exactly a double/,
    })
    t.match(graphql(doc('query { a @include(if: true, if: false) }')), { ok: false }, 'in a directive')
    t.equal(targetOf(doc('mutation { closeIssue(id: 9007199254740992) }')), '9007199254740992')
    t.equal(
      targetOf(doc('mutation { closeIssue(id: 1.0, other: {id: 1}) }')),
      '1',
      'an exact literal is read',
    )
  },
)

t.test(
  'GraphQL: what other lexers read otherwise is refused (found in a review against gqlgen and graphql-ruby)',
  async (t) => {
    const doc = (q: string) => JSON.stringify({ query: q })
    // graphql-js ends the block string at the first """; gqlparser at the last three of the run.
    t.match(
      graphql(
        doc('mutation { tag(labels: ["""x"""" ]) { id } del: deleteUser(id: 7) { id } } #"]) { id } }'),
      ),
      { ok: false, problem: /four or more quotes/ },
    )
    // A bare CR ends a comment for graphql-js, not for graphql-ruby's lexer.
    t.match(
      graphql(
        doc('mutation { tag(labels: ["a" #\r"""\n]) { id } del: deleteUser(id: 7) { id } }\n#"""]) { id } }'),
      ),
      { ok: false, problem: /carriage return/ },
    )
    t.match(graphql(doc('mutation { closeIssue(id: "a\\uD83D\\uDE00b") }')), {
      ok: false,
      problem: /surrogate/,
    })
    t.match(graphql(doc('mutation { closeIssue(id: "a\\u{d83d}b") }')), { ok: false, problem: /surrogate/ })
    t.equal(targetOf(doc('mutation { closeIssue(id: "caf\\u00e9") }\r\n')), 'café', 'other escapes, CRLF')
    t.equal(
      targetOf(doc('mutation { closeIssue(id: """say "hi" """) }')),
      'say "hi" ',
      'quotes inside a block string',
    )
  },
)

t.test('GraphQL: a URL naming a parameter as Rack or qs reads it is refused', async (t) => {
  const body = '{"query":"{ me { id } }"}'
  for (const path of [
    '/graphql?%5Bquery%5D=mutation%7BdeleteAll%7D',
    '/graphql?query%5D=mutation%7BdeleteAll%7D',
    '/graphql?x=1;query=mutation%7BdeleteAll%7D',
  ])
    t.match(graphql(body, 'POST', path), { ok: false }, path)
  t.match(
    graphql(
      '',
      'GET',
      `/graphql?query=${encodeURIComponent('{me}#')};query=${encodeURIComponent('mutation{deleteAll}')}`,
    ),
    { ok: false, problem: /";"/ },
    'GET: Rack takes the last query',
  )
  t.match(graphql(body, 'POST', '/graphql?tag=%5Bx%5D'), { ok: true }, 'brackets in a value are no name')
})

t.test('GraphQL: HEAD is read as GET, and a mutation by HEAD is refused', async (t) => {
  t.match(graphql('', 'HEAD', `/graphql?query=${encodeURIComponent('mutation { deleteAll }')}`), {
    ok: false,
    problem: /a mutation sent by HEAD/,
  })
  t.match(graphql('', 'HEAD', `/graphql?query=${encodeURIComponent('{ viewer }')}`), { ok: true, reads: 1 })
})

t.test('a body that is not valid UTF-8, or starts with a byte-order mark, is refused', async (t) => {
  const invalid = Buffer.concat([
    Buffer.from('{"jsonrpc":"2.0","id":1,"method":"tools/list","x":"'),
    Buffer.from([0xff]),
    Buffer.from('"}'),
  ])
  t.match(readMcpRequest({ contentType: 'application/json', body: invalid }), {
    ok: false,
    problem: /not valid UTF-8/,
  })
  t.match(
    readGraphqlRequest({
      method: 'POST',
      pathWithQuery: '/graphql',
      contentType: 'application/json',
      body: invalid,
    }),
    { ok: false, problem: /not valid UTF-8/ },
  )
  const bom = Buffer.concat([
    Buffer.from([0xef, 0xbb, 0xbf]),
    Buffer.from('{"jsonrpc":"2.0","id":1,"method":"tools/list"}'),
  ])
  t.match(readMcpRequest({ contentType: 'application/json', body: bom }), { ok: false })
})
