import type { ErrorDef } from '../core/errors.js'
import type { Refusal, WriteAnswer } from './gated-write.js'

/** A gated write's answer as an HTTP status and JSON body (contract §8 shapes). */
export interface HttpAnswer {
  status: number
  body: Record<string, unknown>
}

/** A refusal before or instead of a decision: the registry's code, also as the DENY's reason. */
export function refusalAnswer(
  def: ErrorDef,
  detail: Record<string, unknown> = {},
  error = def.message,
): HttpAnswer {
  return {
    status: def.status,
    body: { error, code: def.code, decision: 'DENY', reason: def.code, ...detail },
  }
}

/**
 * How an HTTP transport (gate-proxy, and the TLS-intercepted path, which is the same code)
 * answers a gated write that does not go upstream: DENY 403, STEP_UP 428 with the staged
 * action, a refusal with its registry status. ALLOW is not an answer: the write is forwarded.
 */
export function httpAnswer(answer: Exclude<WriteAnswer<unknown>, { kind: 'settled' }>): HttpAnswer {
  if (answer.kind === 'refused') return fromRefusal(answer.refusal)
  const { outcome, receiptId } = answer
  // An ALLOW goes upstream; were one rendered, it would say so rather than refuse.
  if (answer.decision === 'ALLOW')
    return { status: 200, body: { decision: 'ALLOW', verb: outcome.verb, receiptId } }
  if (answer.decision === 'STEP_UP')
    return {
      status: 428,
      body: {
        error: 'approval required',
        decision: 'STEP_UP',
        verb: outcome.verb,
        reason: outcome.reason,
        actionId: answer.actionId,
        receiptId,
      },
    }
  return {
    status: 403,
    body: {
      error: 'denied by writegate',
      decision: 'DENY',
      verb: outcome.verb,
      reason: outcome.reason,
      receiptId,
    },
  }
}

function fromRefusal(r: Refusal): HttpAnswer {
  return refusalAnswer(r.def, r.detail)
}
