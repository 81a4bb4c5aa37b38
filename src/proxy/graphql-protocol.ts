import { stageHttpRequest } from '../actions/action-stager.js'
import type { CallProtocol, CallRefusal } from './call-protocol.js'
import { type GraphqlCall, mapGraphqlCall, readGraphqlRequest } from './graphql-calls.js'

/**
 * GraphQL through gate-proxy: every root mutation field is decided; one that is not ALLOW
 * refuses the whole request. A refusal is a GraphQL error document (HTTP 200, as GraphQL
 * servers answer `application/json` requests, so clients show its message), its
 * `extensions` carrying the registry code, the decision, the reason and the receipt.
 */
export const graphqlProtocol: CallProtocol<GraphqlCall> = {
  kind: 'graphql',

  read(req) {
    const r = readGraphqlRequest(req)
    return r.ok ? { ok: true, calls: r.mutations, reads: r.reads } : r
  },

  map(system, call) {
    return system.graphql ? mapGraphqlCall(system.graphql, call) : null
  },

  describe(call) {
    return { graphql: { field: call.field } }
  },

  stage(call, calls, f, request) {
    // The approval replays the request as it was sent: only when this field is its one write.
    if (calls.length !== 1) return null
    return stageHttpRequest(f, request, { graphql: { field: call.field } })
  },

  render(refusal, calls) {
    return {
      // GraphQL errors ride on 200, but a body too large to read keeps its 413.
      status: refusal.kind === 'refused' && refusal.def.status === 413 ? 413 : 200,
      contentType: 'application/json',
      body: JSON.stringify(errorDocument(refusal, calls)),
    }
  },
}

function errorDocument(refusal: CallRefusal<GraphqlCall>, calls: readonly GraphqlCall[]) {
  if (refusal.kind === 'refused') {
    return {
      errors: [
        {
          message: refusal.error,
          extensions: {
            code: refusal.def.code,
            decision: 'DENY',
            reason: refusal.def.code,
            status: refusal.def.status,
            ...(refusal.call ? { field: refusal.call.field } : {}),
            ...refusal.detail,
          },
        },
      ],
      data: null,
    }
  }
  const { answer, call } = refusal
  const stepUp = answer.decision === 'STEP_UP'
  const unstaged = stepUp && answer.actionId === null
  return {
    errors: [
      {
        message: stepUp
          ? unstaged
            ? `approval required for ${call.field}: send it as the request's only mutation to stage it for approval`
            : `approval required for ${call.field}: a human must approve action ${answer.actionId}`
          : `denied by writegate: ${call.field} (${answer.outcome.reason})`,
        extensions: {
          code: stepUp ? 'step_up_required' : 'denied',
          decision: answer.decision,
          verb: answer.outcome.verb,
          reason: answer.outcome.reason,
          field: call.field,
          receiptId: answer.receiptId,
          ...(stepUp ? { actionId: answer.actionId } : {}),
          // The other fields of the request were not run either.
          ...(calls.length > 1 ? { refusedFields: calls.map((c) => c.field) } : {}),
        },
      },
    ],
    data: null,
  }
}
