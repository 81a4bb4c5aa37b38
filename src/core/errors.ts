/**
 * The one error registry. Every error the API can answer with is defined here with a
 * stable `code`, its HTTP status and the `error` text clients see. docs/errors.md lists
 * each one, and a test keeps the two in step.
 */
export interface ErrorDef {
  readonly code: string
  readonly status: number
  readonly message: string
  readonly description: string
}

function def(code: string, status: number, message: string, description: string): ErrorDef {
  return { code, status, message, description }
}

export const ERRORS = {
  // Transport and validation
  invalidRequest: def(
    'invalid_request',
    400,
    'invalid request',
    'A field is missing, has the wrong type, or is not allowed.',
  ),
  invalidJson: def('invalid_json', 400, 'malformed JSON body', 'The body could not be parsed as JSON.'),
  payloadTooLarge: def(
    'payload_too_large',
    413,
    'request body too large',
    'The body is over the 1 MB limit.',
  ),
  unsupportedMediaType: def(
    'unsupported_media_type',
    415,
    'unsupported content type',
    'Request bodies must be application/json.',
  ),
  notFound: def('not_found', 404, 'not found', 'No such route.'),
  internal: def(
    'internal_error',
    500,
    'internal error',
    'An unexpected failure; it is logged with the request id.',
  ),
  unavailable: def(
    'unavailable',
    503,
    'service unavailable',
    'A backing store is unreachable; nothing was changed.',
  ),

  // Authentication and authorization
  unknownApiKey: def(
    'unknown_api_key',
    401,
    'unknown API key',
    'The bearer credential is missing, malformed, not an API key, or not a live one.',
  ),
  sponsorTokenRequired: def(
    'sponsor_token_required',
    401,
    'sponsor token required',
    'This endpoint only accepts the tenant sponsor token.',
  ),
  insufficientScope: def(
    'insufficient_scope',
    403,
    'insufficient scope',
    'An agent-scoped key cannot call this endpoint.',
  ),

  // Issuance
  proofRequired: def(
    'proof_required',
    409,
    'email already registered',
    'The email owns a tenant; send its API key, its sponsor token or an invite code.',
  ),
  invalidInvite: def(
    'invalid_invite',
    400,
    'invalid invite code',
    'The invite code is unknown, rotated or expired.',
  ),
  rateLimited: def(
    'rate_limited',
    429,
    'rate limit exceeded',
    'Too many requests from this client; see Retry-After.',
  ),

  // Principals
  principalNotFound: def(
    'principal_not_found',
    404,
    'principal not found',
    'No live principal with this id in the tenant.',
  ),
  principalInactive: def(
    'principal_inactive',
    400,
    'principal is disabled or deleted',
    'The principal is disabled or tombstoned.',
  ),
  invalidName: def('invalid_name', 400, 'invalid name', 'The name breaks the naming rules.'),
  nameTaken: def(
    'name_taken',
    409,
    'name already taken',
    'A live principal or any custom verb (deprecated aliases included) has this name.',
  ),
  nothingToUpdate: def(
    'nothing_to_update',
    400,
    'nothing to update',
    'The PATCH body names no field to change.',
  ),

  // Audit log, badge
  receiptNotFound: def(
    'receipt_not_found',
    404,
    'receipt not found',
    "No receipt with this id in the tenant (another tenant's receipt included).",
  ),
  badgeNotFound: def('badge_not_found', 404, 'badge not found', 'The badge token is unknown or revoked.'),
} as const satisfies Record<string, ErrorDef>

export type ErrorName = keyof typeof ERRORS

/** A domain error that the HTTP layer turns into `{error, code, ...detail}` with the def's status. */
export class WriteGateError extends Error {
  readonly def: ErrorDef
  readonly detail: Record<string, unknown> | undefined
  readonly headers: Record<string, string> | undefined

  constructor(
    def: ErrorDef,
    detail?: Record<string, unknown>,
    opts?: { message?: string; headers?: Record<string, string> },
  ) {
    super(opts?.message ?? def.message)
    this.name = 'WriteGateError'
    this.def = def
    this.detail = detail
    this.headers = opts?.headers
  }

  get status(): number {
    return this.def.status
  }

  get code(): string {
    return this.def.code
  }

  toBody(): Record<string, unknown> {
    return { error: this.message, code: this.def.code, ...(this.detail ?? {}) }
  }
}

export function fail(
  def: ErrorDef,
  detail?: Record<string, unknown>,
  opts?: { message?: string; headers?: Record<string, string> },
): never {
  throw new WriteGateError(def, detail, opts)
}
