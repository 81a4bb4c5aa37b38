import { ERRORS, type ErrorDef } from '../../core/errors.js'

/**
 * How a route authenticates, recorded on its onRequest hook so the OpenAPI document can say
 * so per operation (`security`, and the 401/403 answers the hook gives) without each route
 * repeating it.
 */
export interface RouteAuth {
  scheme: 'apiKey' | 'sponsorToken'
  /** `admin`: an agent-scoped key gets 403 insufficient_scope. */
  adminOnly: boolean
}

const authOf = new WeakMap<object, RouteAuth>()

export function describeAuth<F extends object>(hook: F, auth: RouteAuth): F {
  authOf.set(hook, auth)
  return hook
}

function routeAuth(onRequest: unknown): RouteAuth | undefined {
  const hooks = Array.isArray(onRequest) ? onRequest : [onRequest]
  for (const h of hooks) {
    const auth = typeof h === 'function' ? authOf.get(h) : undefined
    if (auth) return auth
  }
  return undefined
}

const errorBody = (e: ErrorDef) => ({
  description: e.message,
  type: 'object',
  required: ['error', 'code'],
  properties: { error: { type: 'string' }, code: { type: 'string', enum: [e.code] } },
})

interface TransformInput {
  schema: unknown
  url: string
  route: { onRequest?: unknown }
}
interface TransformOutput {
  schema: { response?: unknown }
  url: string
}

/** Wraps the schema transform: an authenticated operation gets its `security` and error answers. */
export function withAuthDocs<I extends TransformInput, O extends TransformOutput>(
  transform: (input: I) => O,
): (input: I) => O {
  return (input) => {
    const out = transform(input)
    const auth = routeAuth(input.route.onRequest)
    if (!auth) return out
    const denied =
      auth.scheme === 'apiKey' ? errorBody(ERRORS.unknownApiKey) : errorBody(ERRORS.sponsorTokenRequired)
    return {
      ...out,
      schema: {
        ...out.schema,
        security: [{ [auth.scheme]: [] }],
        response: {
          401: denied,
          ...(auth.adminOnly ? { 403: errorBody(ERRORS.insufficientScope) } : {}),
          ...(out.schema.response as object | undefined),
        },
      },
    }
  }
}
