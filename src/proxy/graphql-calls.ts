import {
  type DocumentNode,
  type FragmentDefinitionNode,
  Kind,
  type OperationDefinitionNode,
  parse,
  type SelectionSetNode,
  type ValueNode,
  valueFromASTUntyped,
} from 'graphql'
import { fillText } from '../actions/param-template.js'
import type { GraphqlBinding } from '../core/enrolled-system.js'
import { jsonAmbiguity } from '../core/json-ambiguity.js'
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../core/json-depth.js'
import { unstorableStrings } from '../core/storable-json.js'
import { globMatcher } from './call-glob.js'
import { callMediaType, NOT_UTF8, READ_OTHERWISE, utf8Text } from './call-media-type.js'
import {
  documentTextAmbiguity,
  literalAmbiguity,
  parameterNamed,
  urlParameterAmbiguity,
} from './graphql-ambiguity.js'
import { caseVariantOf } from './member-case.js'

/** One root mutation field a GraphQL request would execute: what the gate decides. */
export interface GraphqlCall {
  /** The field's name on the Mutation type (never its alias). */
  field: string
  /** Its arguments with the request's variables substituted. */
  args: Record<string, unknown>
}

export type GraphqlRequest =
  | { ok: true; mutations: GraphqlCall[]; reads: number }
  | { ok: false; problem: string }

const MAX_DOCUMENTS = 32
const MAX_FRAGMENT_DEPTH = 32
// Each is decided, with a receipt and a check of quota: a request is not a way to spend a month's.
const MAX_MUTATIONS = 32
/**
 * Selections read per request, over all its documents and operations. Each operation reads its
 * fragments again (a server collects each operation's fields on its own), so thousands of
 * mutation operations spreading one fragment of thousands of spreads cost their product, on
 * the proxy's one thread: 15 s for 845 KB (found in review). A real document reads far fewer.
 */
const MAX_SELECTIONS = 100_000
/**
 * Values read into mutation arguments per request, variables counted at each reference, a
 * string or key as one value per 16 characters besides (textCost). A variable is substituted
 * whole wherever it is referenced, so `[$v $v …]` costs its references times its size to read,
 * check and template: 12 s of the proxy's one thread for a 104 KB request (found in review),
 * minutes at the body limit. Twice what a 1 MiB body can hold once.
 */
const MAX_ARGUMENT_VALUES = 1_000_000
const TOO_MANY_VALUES = `the request's arguments, with their variables substituted, hold more than ${MAX_ARGUMENT_VALUES} values`
// Variables are templated into targets: past this, reading them could exhaust the stack.
const TOO_DEEP = `the request nests deeper than ${MAX_JSON_DEPTH} levels`

interface Operation {
  query: string
  variables: Record<string, unknown>
}

function operationsOf(
  method: string,
  pathWithQuery: string,
  contentType: string,
  body: Buffer | null,
): Operation[] | string {
  const url = new URL(pathWithQuery, 'http://gate.invalid')
  const urlProblem = urlParameterAmbiguity(url.search.slice(1), URL_PARAMETERS)
  if (urlProblem !== null) return `${urlProblem}: ${READ_OTHERWISE}`
  // HEAD is GET without the answer's body, and servers route it so (Rails runs the GET action).
  if (method === 'GET' || method === 'HEAD') {
    const params = url.searchParams
    // A parameter given twice is one value to the gate (the first) and maybe another to a server.
    const twice = PARAMETERS.find((p) => params.getAll(p).length > 1)
    if (twice !== undefined) return `the URL gives ${twice} more than once`
    if (DOCUMENT_IDS.some((p) => params.has(p))) return PERSISTED
    const query = params.get('query')
    if (query === null) return 'a GET request carries no query parameter'
    let variables: unknown = {}
    const raw = params.get('variables')
    if (raw !== null) {
      try {
        variables = JSON.parse(raw)
      } catch {
        return 'variables is not JSON'
      }
      if (nestedDeeperThan(variables)) return TOO_DEEP
      const ambiguity = jsonAmbiguity(raw, { goCase: false })
      if (ambiguity !== null) return `${ambiguity}: ${READ_OTHERWISE}`
    }
    if (!variablesObject(variables)) return NOT_AN_OBJECT
    return [{ query, variables: variables ?? {} }]
  }
  // Some servers read the request's parameters from its URL even on a POST (express-graphql
  // prefers them to the body's): a document there is one the gate would not have read.
  // Names are compared regardless of case, as ASP.NET Core reads them (urlParameterAmbiguity).
  for (const name of url.searchParams.keys())
    if (parameterNamed(name, URL_PARAMETERS) !== undefined)
      return 'a POST carries GraphQL parameters in its URL'
  const media = callMediaType(contentType)
  if ('problem' in media) return media.problem
  const text = utf8Text(body ?? Buffer.alloc(0))
  if (text === null) return NOT_UTF8
  if (media.essence === 'application/graphql') return [{ query: text, variables: {} }]
  // Only JSON is read as JSON: a server that parses a form or text body its own way could find
  // another document in the same bytes.
  // application/graphql+json: the request type of earlier GraphQL-over-HTTP drafts, JSON too.
  if (media.essence !== 'application/json' && media.essence !== 'application/graphql+json')
    return 'a GraphQL POST is sent as application/json or application/graphql'
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    return 'the body is not JSON'
  }
  if (nestedDeeperThan(json)) return TOO_DEEP
  const ambiguity = jsonAmbiguity(text, { goCase: false })
  if (ambiguity !== null) return `${ambiguity}: ${READ_OTHERWISE}`
  const entries = Array.isArray(json) ? json : [json]
  if (entries.length === 0 || entries.length > MAX_DOCUMENTS)
    return `a batch holds 1 to ${MAX_DOCUMENTS} operations`
  const ops: Operation[] = []
  for (const e of entries) {
    if (!isObject(e)) return 'an operation is not an object'
    const variant = caseVariantOf(e, PARAMETER_SET)
    if (variant !== null) return `member ${variant} differs from a GraphQL parameter only by case`
    // A persisted query names a document by its hash or id; the gate cannot read what it would
    // run. An id beside a `query` is refused too: a server may prefer the id.
    if (Object.keys(e).some((name) => parameterNamed(name, DOCUMENT_IDS) !== undefined)) return PERSISTED
    if (typeof e.query !== 'string')
      return isObject(e.extensions) && 'persistedQuery' in e.extensions
        ? PERSISTED
        : 'an operation has no query'
    if (!variablesObject(e.variables)) return NOT_AN_OBJECT
    ops.push({ query: e.query, variables: (e.variables as Record<string, unknown> | null | undefined) ?? {} })
  }
  return ops
}

/** The request parameters of GraphQL over HTTP. */
const PARAMETERS = ['query', 'variables', 'operationName', 'extensions']
const PARAMETER_SET: ReadonlySet<string> = new Set(PARAMETERS)
/**
 * Also a persisted document's id (GraphQL.NET and the GraphQL-over-HTTP draft's `documentId`,
 * Relay's `doc_id`, Hot Chocolate's `id`), which a server reads from the URL as well.
 */
const DOCUMENT_IDS = ['documentId', 'doc_id', 'id']
const URL_PARAMETERS = [...PARAMETERS, ...DOCUMENT_IDS]
const PERSISTED = 'a persisted query the gate cannot resolve (send the document itself)'

// A server that parses a string `variables` (express-graphql does) would run other values than
// the gate decided on: only an object, null or none is read.
const NOT_AN_OBJECT = 'variables is not an object'
const variablesObject = (v: unknown) => v === undefined || v === null || isObject(v)

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

/**
 * Every root mutation field of every mutation operation in the document, whatever
 * `operationName` says: a server runs one operation, but which one is its reading of the
 * request, and a gate that decided only the one it thought would run could be told another.
 * Fields reached through fragments (named or inline) are root fields too; aliases are read
 * through to the field; `__typename` is not a write.
 */
function rootMutations(
  doc: DocumentNode,
  sent: Record<string, unknown>,
  budget: Budget,
): GraphqlCall[] | string {
  const fragments = new Map<string, FragmentDefinitionNode>()
  for (const d of doc.definitions) {
    if (d.kind !== Kind.FRAGMENT_DEFINITION) continue
    // Servers refuse the document (fragment names are unique); one that took the first of two
    // would run another fragment than the gate read.
    if (fragments.has(d.name.value)) return `fragment ${d.name.value} is defined twice`
    fragments.set(d.name.value, d)
  }
  const calls: GraphqlCall[] = []
  // Per operation, as a server collects root fields (graphql-js's collectFields): a named
  // fragment spread a second time adds nothing. Walking it again instead would let a few hundred
  // bytes of fragments that each spread the last twice expand to millions of fields.
  let visited = new Set<string>()
  const sentSizes = new Map<string, number>()
  const walk = (set: SelectionSetNode, depth: number, variables: Variables): string | null => {
    if (depth > MAX_FRAGMENT_DEPTH) return 'fragments nest too deep'
    budget.selections -= set.selections.length
    if (budget.selections < 0)
      return `a request reads at most ${MAX_SELECTIONS} selections, its fragments included`
    for (const sel of set.selections) {
      if (sel.kind === Kind.FIELD) {
        if (sel.name.value.startsWith('__')) continue
        if (calls.length === MAX_MUTATIONS) return `a request holds at most ${MAX_MUTATIONS} mutation fields`
        // No prototype: an argument named `__proto__` is an argument like any other.
        const args: Record<string, unknown> = Object.create(null)
        for (const a of sel.arguments ?? []) {
          const value = literalValue(a.value, budget, variables)
          if (value === TOO_DEEP_VALUE) return TOO_DEEP
          if (value === TOO_MANY_VALUES_VALUE) return TOO_MANY_VALUES
          args[a.name.value] = value
        }
        calls.push({ field: sel.name.value, args })
      } else if (sel.kind === Kind.INLINE_FRAGMENT) {
        const problem = walk(sel.selectionSet, depth + 1, variables)
        if (problem) return problem
      } else {
        const name = sel.name.value
        if (visited.has(name)) continue
        visited.add(name)
        const f = fragments.get(name)
        if (!f) return `fragment ${name} is not defined`
        const problem = walk(f.selectionSet, depth + 1, variables)
        if (problem) return problem
      }
    }
    return null
  }
  for (const d of doc.definitions) {
    if (d.kind !== Kind.OPERATION_DEFINITION || d.operation !== 'mutation') continue
    visited = new Set()
    const variables = variablesOf(d, sent, sentSizes, budget)
    if (variables === TOO_DEEP_VALUE) return TOO_DEEP
    if (variables === TOO_MANY_VALUES_VALUE) return TOO_MANY_VALUES
    const problem = walk(d.selectionSet, 0, variables)
    if (problem) return problem
  }
  return calls
}

/** What literalValue answers for a value nested deeper than MAX_JSON_DEPTH. */
const TOO_DEEP_VALUE: unique symbol = Symbol('too deep')
/** What literalValue answers once the request's MAX_ARGUMENT_VALUES are spent. */
const TOO_MANY_VALUES_VALUE: unique symbol = Symbol('too many values')

/** What a request may still read: selections, and values into arguments. */
interface Budget {
  selections: number
  values: number
}

/** An operation's variables' values, and how many values each holds (counted once, when read). */
interface Variables {
  values: Record<string, unknown>
  sizes: Map<string, number>
}

/**
 * A literal's value, variables substituted, or TOO_DEEP_VALUE: literals written in the document
 * nest as deep as the document does, and are templated into targets as the variables are (which
 * are refused past MAX_JSON_DEPTH when read); reading a deeper one could exhaust the stack. Its
 * values, each variable's counted at each reference, are spent from `budget` before anything is
 * substituted (TOO_MANY_VALUES_VALUE once it is spent).
 */
function literalValue(node: ValueNode, budget: Budget, variables?: Variables): unknown {
  const read = readLiteral(node, MAX_JSON_DEPTH, variables?.sizes)
  if (read === 'too deep') return TOO_DEEP_VALUE
  budget.values -= read
  if (budget.values < 0) return TOO_MANY_VALUES_VALUE
  const value = valueFromASTUntyped(node, variables?.values)
  return nestedDeeperThan(value) ? TOO_DEEP_VALUE : value
}

/**
 * How many values a literal holds, a variable counting as its value's size, or 'too deep' when
 * the literal itself nests lists or objects deeper than `max` levels (iteratively).
 */
function readLiteral(node: ValueNode, max: number, sizes?: Map<string, number>): number | 'too deep' {
  let count = 0
  const stack: [ValueNode, number][] = [[node, 0]]
  while (stack.length > 0) {
    const [v, depth] = stack.pop() as [ValueNode, number]
    if (v.kind === Kind.VARIABLE) {
      count += sizes?.get(v.name.value) ?? 1
      continue
    }
    count += v.kind === Kind.STRING ? textCost(v.value) : 1
    if (v.kind !== Kind.LIST && v.kind !== Kind.OBJECT) continue
    if (depth >= max) return 'too deep'
    if (v.kind === Kind.LIST) for (const item of v.values) stack.push([item, depth + 1])
    else
      for (const f of v.fields) {
        count += textCost(f.name.value)
        stack.push([f.value, depth + 1])
      }
  }
  return count
}

/**
 * What a string costs the budget: one value, and one per 16 of its characters. Each copy is
 * scanned and templated as a whole: counted as one value, a 600 KB string referenced 24,000
 * times held the proxy's thread for 20 s and ran it out of memory (found in review).
 */
const textCost = (text: string): number => 1 + (text.length >>> 4)

/**
 * What a JSON value costs the budget (values, strings and keys by their length: textCost),
 * counting no further than `cap` (iteratively).
 */
function valueCount(value: unknown, cap: number): number {
  let count = 0
  const stack: unknown[] = [value]
  while (stack.length > 0 && count <= cap) {
    const v = stack.pop()
    if (typeof v === 'string') {
      count += textCost(v)
      continue
    }
    count++
    if (v === null || typeof v !== 'object') continue
    if (Array.isArray(v)) for (const item of v) stack.push(item)
    else
      for (const [key, item] of Object.entries(v)) {
        count += textCost(key)
        stack.push(item)
      }
  }
  return count
}

/**
 * The values a server gives an operation's variables: the one sent, when the request's
 * `variables` has it as its own (never `constructor` or `toString` from a prototype), else the
 * definition's default. A variable the operation does not define has no value (a server refuses
 * the document).
 */
function variablesOf(
  op: OperationDefinitionNode,
  sent: Record<string, unknown>,
  sentSizes: Map<string, number>,
  budget: Budget,
): Variables | typeof TOO_DEEP_VALUE | typeof TOO_MANY_VALUES_VALUE {
  const values: Record<string, unknown> = Object.create(null)
  const sizes = new Map<string, number>()
  for (const d of op.variableDefinitions ?? []) {
    const name = d.variable.name.value
    if (Object.hasOwn(sent, name)) {
      values[name] = sent[name]
      // Counted once per document, not once per operation that defines it: thousands of
      // operations can share one large variable. One larger than the whole budget is refused at
      // its first reference, counted no further.
      let size = sentSizes.get(name)
      if (size === undefined) {
        size = valueCount(sent[name], MAX_ARGUMENT_VALUES)
        sentSizes.set(name, size)
      }
      sizes.set(name, size)
    } else if (d.defaultValue) {
      const value = literalValue(d.defaultValue, budget)
      if (value === TOO_DEEP_VALUE || value === TOO_MANY_VALUES_VALUE) return value
      values[name] = value
      sizes.set(name, valueCount(value, MAX_ARGUMENT_VALUES))
    }
  }
  return { values, sizes }
}

/**
 * What a GraphQL request would write, read with the reference parser (`graphql`): its root
 * mutation fields, and how many read operations (queries, subscriptions) it holds. A request
 * the gate cannot read fully (a persisted query, a document that does not parse, a mutation
 * sent by GET) is refused rather than guessed at.
 */
export function readGraphqlRequest(req: {
  method: string
  pathWithQuery: string
  contentType: string
  body: Buffer | null
}): GraphqlRequest {
  const ops = operationsOf(req.method, req.pathWithQuery, req.contentType, req.body)
  if (typeof ops === 'string') return { ok: false, problem: ops }
  const budget: Budget = { selections: MAX_SELECTIONS, values: MAX_ARGUMENT_VALUES }
  const mutations: GraphqlCall[] = []
  let reads = 0
  for (const op of ops) {
    const textProblem = documentTextAmbiguity(op.query)
    if (textProblem !== null) return { ok: false, problem: `${textProblem}: ${READ_OTHERWISE}` }
    let doc: DocumentNode
    try {
      doc = parse(op.query, { noLocation: true, maxTokens: 50_000 })
    } catch (err) {
      return { ok: false, problem: `the document does not parse: ${(err as Error).message.split('\n')[0]}` }
    }
    const ambiguity = literalAmbiguity(doc)
    if (ambiguity !== null) return { ok: false, problem: `${ambiguity}: ${READ_OTHERWISE}` }
    for (const d of doc.definitions)
      if (d.kind === Kind.OPERATION_DEFINITION && d.operation !== 'mutation') reads++
    const found = rootMutations(doc, op.variables, budget)
    if (typeof found === 'string') return { ok: false, problem: found }
    // A mutation by GET (or HEAD) would be a write some servers run and others refuse: refused here.
    if (found.length > 0 && req.method !== 'POST')
      return { ok: false, problem: `a mutation sent by ${req.method}` }
    if (mutations.length + found.length > MAX_MUTATIONS)
      return { ok: false, problem: `a request holds at most ${MAX_MUTATIONS} mutation fields` }
    // Arguments go into receipts (a target read off them): one Postgres cannot store would be
    // forwarded and never logged (found in review).
    for (const m of found) {
      const unstorable = unstorableStrings(m.args)
      if (unstorable !== null) return { ok: false, problem: `${m.field}: ${unstorable}` }
    }
    for (const m of found) mutations.push(m)
  }
  return { ok: true, mutations, reads }
}

/** The verb (and target) a system maps a mutation field to: the first route whose field (or glob) matches. */
export function mapGraphqlCall(
  binding: GraphqlBinding,
  call: GraphqlCall,
): { verb: string; target: string | null } | null {
  for (const r of binding.mutations) {
    if (!globMatcher(r.field)(call.field)) continue
    return { verb: r.verb, target: r.target === undefined ? null : fillText(r.target, { params: call.args }) }
  }
  return null
}
