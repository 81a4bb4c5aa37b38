import { BREAK, type DocumentNode, visit } from 'graphql'
import { clip, exactDouble } from '../core/json-ambiguity.js'

/**
 * What GraphQL servers read otherwise than the gate's reference parser (graphql-js), found by
 * reading their lexers and query-string parsers. The gate refuses such a request rather than
 * decide one reading of it.
 */

/**
 * Text in a document that lexers disagree on:
 * - four or more quotes in a row: graphql-js ends a block string at the first `"""`, gqlparser
 *   (gqlgen) at the last three of the run, graphql-ruby allows two more; the rest of the line
 *   can be a string to one and a mutation field to the other;
 * - a carriage return not followed by a line feed: graphql-js ends a comment there, graphql-ruby's
 *   lexer only at a line feed, so what follows is code to one and comment to the other;
 * - an escaped surrogate (`\uD83D\uDE00`): graphql-js joins a pair into one character, gqlparser
 *   writes each half as U+FFFD, so a target templated from the string differs;
 * - U+2028 or U+2029 raw: graphql-js keeps a comment going through them, graphql-java before 14
 *   ended it there, so what follows is code to one and comment to the other.
 */
export function documentTextAmbiguity(query: string): string | null {
  if (/"{4}/.test(query))
    return 'the document holds four or more quotes in a row (lexers end block strings differently)'
  if (/\r(?!\n)/.test(query))
    return 'the document holds a carriage return without a line feed (lexers end comments differently)'
  if (/\\u(?:\{0*)?[dD][89a-fA-F][0-9a-fA-F]{2}(?![0-9a-fA-F])/.test(query))
    return 'the document escapes a surrogate (lexers join or replace the halves differently)'
  if (/[\u2028\u2029]/.test(query))
    return 'the document holds U+2028 or U+2029 (lexers end comments there differently; escape it in a string)'
  return null
}

/**
 * What in a document's own values could be read two ways, as `jsonAmbiguity` finds in JSON: an
 * argument or input field given twice (the gate's reading keeps the last; a server that does not
 * validate could take the first), and a number whose digits are not the value JavaScript reads (a server may take an
 * `ID` or a custom scalar from its digits, the gate's target from the rounded double).
 */
export function literalAmbiguity(doc: DocumentNode): string | null {
  let found: string | null = null
  const once = (names: readonly { name: { value: string } }[] | undefined, what: string) => {
    const seen = new Set<string>()
    for (const { name } of names ?? []) {
      if (seen.has(name.value)) {
        found = `${what} ${name.value} is given twice`
        return BREAK
      }
      seen.add(name.value)
    }
    return undefined
  }
  const exact = (node: { value: string }) => {
    if (exactDouble(node.value)) return undefined
    found = `the number ${clip(node.value)} is not exactly a double`
    return BREAK
  }
  visit(doc, {
    Field: (node) => once(node.arguments, 'argument'),
    Directive: (node) => once(node.arguments, 'argument'),
    ObjectValue: (node) => once(node.fields, 'input field'),
    IntValue: exact,
    FloatValue: exact,
  })
  return found
}

/**
 * A query string that names a GraphQL parameter in a way `URLSearchParams` does not see: Rack
 * (Rails, so graphql-ruby's controller) also splits parameters on `;` and reads `[query]`,
 * `query]` and `]query` as `query`; Express's `qs` reads `[query]` as `query`; ASP.NET Core
 * (GraphQL.NET reads the URL's parameters on a POST too, and prefers them) reads names
 * regardless of letter case, so `QUERY` is `query` (found in review). A server that prefers the
 * URL's parameters to the body's would run a document the gate never read.
 */
export function urlParameterAmbiguity(search: string, parameters: readonly string[]): string | null {
  if (search.includes(';')) return 'the URL holds ";" (Rack splits parameters on it)'
  for (const name of new URLSearchParams(search).keys()) {
    const bare = name.replace(/[[\]]/g, '')
    const parameter = parameterNamed(bare, parameters)
    if (parameter === undefined || name === parameter) continue
    return bare === parameter
      ? `the URL names ${parameter} as ${name} (Rack and qs read it as ${parameter})`
      : `the URL names ${parameter} as ${name} (ASP.NET Core reads names regardless of case)`
  }
  return null
}

/** The GraphQL parameter a URL parameter's name is to a server that ignores letter case. */
export function parameterNamed(name: string, parameters: readonly string[]): string | undefined {
  // Both folds: a character outside ASCII may fold onto an ASCII one one way only (ſ to S, ı to I).
  const lower = name.toLowerCase()
  const upper = name.toUpperCase()
  return parameters.find((p) => p.toLowerCase() === lower || p.toUpperCase() === upper)
}
