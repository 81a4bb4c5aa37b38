import type { StagedFor, StagedRequest } from '../actions/action-stager.js'
import type { SystemRecord } from '../core/enrolled-system.js'
import type { ErrorDef } from '../core/errors.js'
import type { CompiledSnapshot } from '../core/snapshot.js'
import type { Environment } from '../core/verbs.js'
import type { Staged, WriteAnswer } from '../gate/gated-write.js'
import type { MessageRewrite } from './mcp-tools-filter.js'

/** A buffered request to a body-aware endpoint, as the protocol reads it. */
export interface CallRequest {
  method: string
  pathWithQuery: string
  contentType: string
  body: Buffer
  /** The agent's REPLAYED_HEADERS (accept, MCP's session and version), kept if the request is staged. */
  headers: Record<string, string>
}

export type ReadCalls<Call> =
  /** `reads`: calls that write nothing (queries, `tools/list`, notifications), passed per the system's read policy. */
  { ok: true; calls: Call[]; reads: number } | { ok: false; problem: string }

/** Why a body-aware request is not forwarded: a decision that was not ALLOW, or a refusal. */
export type CallRefusal<Call> =
  | { kind: 'decided'; answer: Extract<WriteAnswer<unknown>, { kind: 'decided' }>; call: Call }
  | { kind: 'refused'; def: ErrorDef; error: string; detail: Record<string, unknown>; call: Call | null }

/** What the agent gets back, in the protocol's own terms. */
export interface CallResponse {
  status: number
  contentType: string
  body: string
}

/**
 * A protocol whose writes are calls inside a request body (MCP tool calls, GraphQL mutations):
 * how to read the calls out of a request, map one to a verb under a system's routes, describe
 * it on its receipt, stage it for approval, and answer a refusal so an agent framework shows it
 * to the model. Every call is decided by the one gated-write step; this only renders.
 */
export interface CallProtocol<Call> {
  readonly kind: 'mcp' | 'graphql'
  read(req: CallRequest): ReadCalls<Call>
  map(system: SystemRecord, call: Call): { verb: string; target: string | null } | null
  /** What the CHECK receipt records about the call (never its whole payload). */
  describe(call: Call): Record<string, unknown>
  /**
   * Stages a STEP_UP call for approval; null when it cannot be approved on its own (a call
   * inside a request that holds other writes).
   */
  stage(call: Call, calls: readonly Call[], f: StagedFor, request: StagedRequest): Staged | null
  /** The answer to `calls` when the request is not forwarded. */
  render(refusal: CallRefusal<Call>, calls: readonly Call[], req: CallRequest): CallResponse
  /**
   * How the system's answers to the key's reads are rewritten (MCP's `filterToolsList`), under
   * the current snapshot; absent or null when they pass unchanged.
   */
  answerFilter?(system: SystemRecord): AnswerFilter | null
}

/** Builds an answer's rewrite for one key under one snapshot. */
export type AnswerFilter = (
  snap: CompiledSnapshot,
  who: { keyId: string; environment: Environment | null },
  nowSeconds: number,
) => MessageRewrite
