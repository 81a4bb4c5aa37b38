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
  headersTooLarge: def(
    'headers_too_large',
    431,
    'request headers too large',
    'The request line and headers together are over 16 KiB.',
  ),
  requestTimeout: def(
    'request_timeout',
    408,
    'request timed out',
    "The request (its headers, or all of it) did not arrive within the port's time limit.",
  ),
  expectationFailed: def(
    'expectation_failed',
    417,
    'expectation not supported',
    'The request sent an `Expect` header other than `100-continue`, the only expectation served. The connection is closed.',
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
    'A backing store is unreachable or did not answer in time (reason: database, hot_store, audit_backlog or deadline); retry.',
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
  keyBarred: def(
    'key_barred',
    403,
    "this key is on the sponsor's revocation roster",
    'An admin endpoint (or the portal) was used with a key the sponsor revoked with `POST /v1/revoke`, by its keyId or its principal (`barred` says which). Such a key may still call `POST /v1/check` (DENY, on record) and the endpoints agent keys may call, but no admin endpoint and no portal page until the sponsor reinstates it. A tenant-wide kill switch does not bar admin keys.',
  ),

  // Issuance
  proofRequired: def(
    'proof_required',
    409,
    'email already registered',
    'The email owns a tenant; send its API key, its sponsor token or an invite code.',
  ),
  emailNotInTenant: def(
    'email_not_in_tenant',
    409,
    "email is not in the credential's tenant",
    "POST /v1/keys with a live credential names an email that is not its own tenant's (it owns another tenant or none: one answer for both): a credential proves membership of a tenant, not the right to create another. Send no Authorization to create a tenant; use an invite code to add a member.",
  ),
  credentialChanged: def(
    'credential_changed',
    409,
    'another request replaced this credential first',
    'POST /v1/sponsor/rotate or /v1/sponsor/totp raced another with the same sponsor token, and the other came first: this one changed nothing and returns no credential (the other answer holds the live one). A rotation that lost leaves the token it was sent with dead.',
  ),
  invalidInvite: def(
    'invalid_invite',
    400,
    'invalid invite code',
    'The invite code is unknown, rotated or expired, or withdrawn with the key that made it.',
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

  // Policies and verbs
  emptyPolicy: def('empty_policy', 400, 'empty policy', 'A policy PUT must name at least one verb.'),
  unknownVerb: def(
    'unknown_verb',
    400,
    'unknown verb',
    'A verb is not in the vocabulary; `verbs` lists which.',
  ),
  unknownMode: def(
    'unknown_mode',
    400,
    'unknown mode',
    'A mode is not allow, deny, require_grant or step_up (or inherit, on principal overrides).',
  ),
  unknownEnvironment: def(
    'unknown_environment',
    400,
    'unknown environment',
    'Environments are dev, staging and prod.',
  ),
  deprecatedVerb: def(
    'deprecated_verb',
    400,
    'deprecated verb',
    'A new policy may not use a deprecated verb name; `verbs` lists which.',
  ),
  builtinCollision: def(
    'builtin_collision',
    400,
    'name collides with a built-in verb',
    'Custom verbs may not reuse a built-in verb name.',
  ),
  verbNotFound: def(
    'verb_not_found',
    404,
    'verb not found',
    'No such live custom verb in the tenant (deprecated verbs cannot be changed).',
  ),
  registryConflict: def(
    'registry_conflict',
    409,
    'verb registry changed concurrently',
    'Another change to the verb registry won; fetch the vocabulary and retry.',
  ),
  verbLimit: def(
    'verb_limit_reached',
    409,
    'custom verb limit reached',
    'A tenant may hold 200 custom verbs, deprecated ones included.',
  ),

  // Checks, tokens, grants, the roster
  quotaExhausted: def(
    'quota_exhausted',
    402,
    'monthly check quota exhausted',
    'The key used its monthly checks. No receipt was written.',
  ),
  gateUnavailable: def(
    'gate_unavailable',
    503,
    'gate unavailable',
    'The decision could not be committed; nothing was decided.',
  ),
  publishPending: def(
    'publish_pending',
    503,
    'change saved but not yet in effect',
    'The change is committed; it takes effect when the hot store is reachable again.',
  ),
  unknownSystem: def(
    'unknown_system',
    400,
    'unknown system',
    'The systemId is not an enrolled system of the tenant.',
  ),
  unknownTool: def(
    'unknown_tool',
    400,
    'unknown tool',
    'No enrolled system of the tenant defines this tool.',
  ),
  invalidParams: def(
    'invalid_params',
    400,
    'invalid tool params',
    "The params do not match the tool's JSON Schema.",
  ),
  keyNotFound: def('key_not_found', 404, 'key not found', 'No API key with this id in the tenant.'),
  notRevoked: def(
    'not_revoked',
    404,
    'not on the revocation roster',
    'Reinstate names a target that is not revoked.',
  ),
  // Audit log, badge
  receiptNotFound: def(
    'receipt_not_found',
    404,
    'receipt not found',
    "No receipt with this id in the tenant (another tenant's receipt included).",
  ),
  badgeNotFound: def('badge_not_found', 404, 'badge not found', 'The badge token is unknown or revoked.'),
  streamLimitReached: def(
    'stream_limit_reached',
    429,
    'too many open receipt streams',
    'The tenant (or this control-plane process) already holds as many open receipt streams as it may; close one first.',
  ),

  // Gated execution and agent actions
  unsafePath: def(
    'unsafe_path',
    400,
    'unsafe upstream path',
    'The path could be read as another path or host (dot or empty segments, encoded dots, slashes or backslashes, control bytes); it is refused, never normalised.',
  ),
  upstreamError: def(
    'upstream_error',
    502,
    'upstream error',
    'The write was authorised and sent, but the upstream answered 5xx, timed out, refused the connection or sent too much; the receipt records what happened. gate-proxy answers a CONNECT to a pass-through host that cannot be reached so too (no write, no receipt).',
  ),
  upstreamCertificateInvalid: def(
    'upstream_certificate_invalid',
    502,
    'the upstream certificate does not verify',
    "gate-proxy: the upstream's TLS certificate did not verify against the system's caBundle or the trust store (expired, another host's, an unknown issuer). The handshake failed, so the write was not sent; `certificateError` says why and `receiptId` names the decision.",
  ),
  upstreamAddressRefused: def(
    'upstream_address_refused',
    502,
    'the upstream resolves to a private address',
    "The system's upstream was public when it was enrolled, and its name now resolves to a loopback, private or link-local address (a changed DNS record: rebinding). The connection was refused, so nothing of the write was sent. The address is logged, not told to the agent.",
  ),
  answerWithheld: def(
    'answer_withheld',
    502,
    "the upstream's answer was withheld",
    "gate-proxy: the write was sent, but the upstream's answer carried back the credential writegate injected (`reason: credential_echoed`), or came compressed though asked for uncompressed, so it could not be searched for it (`reason: answer_compressed`). The agent never holds that credential, so the answer is not relayed; once its headers were relayed, the connection is cut instead.",
  ),
  upstreamTimeout: def(
    'upstream_timeout',
    504,
    'upstream timed out',
    'gate-proxy: the write was authorised and forwarded, but the upstream connection stayed silent for proxy.upstreamTimeoutMs (connecting, or before its response headers).',
  ),
  actionNotFound: def(
    'action_not_found',
    404,
    'action not found',
    'No pending, unexpired agent action with this id in the tenant.',
  ),
  actionSystemChanged: def(
    'action_system_changed',
    409,
    'the system changed since this action was staged',
    "The action's system (its upstream, credential, routes or tools) was changed after the action was staged, so what would be sent is not what the approver was shown. Nothing is sent; dismiss the action and have the agent stage the write again.",
  ),
  totpRequired: def(
    'totp_required',
    401,
    'TOTP code required',
    'The action needs step-up: send totpCode (an authenticator code or a backup code).',
  ),
  totpInvalid: def(
    'totp_invalid',
    401,
    'TOTP code invalid',
    'The code is wrong, outside its window, already used, or a used backup code.',
  ),
  stepUpLocked: def(
    'step_up_locked',
    403,
    'step-up authenticator locked',
    'Too many wrong codes (a bucket of 100 that drains by 100 every 30 days overflowed): the sponsor must re-enrol the authenticator (POST /v1/sponsor/totp).',
  ),
  systemChanged: def(
    'system_changed',
    409,
    'the system changed while the write was under way',
    "The execute's system was changed (its upstream, credential, routes or tools) after the request was read and before it was authorised. Nothing was sent and the lease is not used up: execute again.",
  ),
  totpUnreadable: def(
    'totp_unreadable',
    503,
    "the authenticator's secret cannot be read with this master key",
    "The tenant's authenticator secret was sealed under another master key than the control plane's, so no authenticator code can be checked (backup codes still work): the sponsor must re-enrol it (POST /v1/sponsor/totp).",
  ),
  approvalLocked: def(
    'approval_locked',
    429,
    'too many code attempts',
    'Too many codes were tried for this action or tenant; see Retry-After.',
  ),
  // The portal (docs/portal.md)
  portalSessionRequired: def(
    'portal_session_required',
    401,
    'portal session required',
    'The portal page or action needs a signed-in portal session (expired, signed out, or its key died).',
  ),
  csrfInvalid: def(
    'csrf_invalid',
    403,
    'form not accepted',
    "A portal form was posted without its session's CSRF token, or from another origin.",
  ),
  signInLocked: def(
    'sign_in_locked',
    429,
    'too many sign-in attempts',
    'Too many portal sign-ins were tried from this address or for this tenant; see Retry-After.',
  ),
  sponsorTokenInvalid: def(
    'sponsor_token_invalid',
    401,
    'sponsor token required',
    "A portal kill-switch, reinstate or grant form was sent without the tenant's own sponsor token.",
  ),
  unmappedRequest: def(
    'unmapped_request',
    400,
    'request matches no route',
    'No route of the enrolled system maps this method and path to a verb, so it cannot be gated.',
  ),
  callsEndpoint: def(
    'calls_endpoint',
    400,
    'request goes to an MCP or GraphQL endpoint',
    "The request goes to the system's MCP or GraphQL endpoint, whose writes are the calls in its body: gate-proxy decides each call under its own verb, and /v1/check does not lease such a request.",
  ),
  verbMismatch: def(
    'verb_mismatch',
    400,
    'verb does not match the request',
    "The check's verb is not the verb the system's route (or the tool) maps this write to.",
  ),

  // Enrolled systems (/v1/systems)
  systemNotFound: def(
    'system_not_found',
    404,
    'system not found',
    "No live enrolled system with this id in the tenant (another tenant's included).",
  ),
  systemExists: def(
    'system_exists',
    409,
    'system id already taken',
    'The tenant has (or had: deleted ids are never reused) a system with this id.',
  ),
  versionConflict: def(
    'version_conflict',
    409,
    'version conflict',
    'ifVersion is not the current version: another change came first. Fetch the record and retry.',
  ),
  systemLimit: def(
    'system_limit_reached',
    409,
    'enrolled system limit reached',
    'A tenant may enrol 100 systems.',
  ),
  systemsSizeLimit: def(
    'systems_size_limit_reached',
    409,
    'enrolled systems size limit reached',
    "A tenant's enrolled systems may hold 4 MiB of JSON together: every change re-sends all of them to every proxy of the tenant.",
  ),
  toolTaken: def(
    'tool_taken',
    409,
    'tool name already used',
    "Another of the tenant's systems defines a tool with this name (tools are called by name).",
  ),
  privateUpstream: def(
    'private_upstream',
    400,
    'private upstream not allowed',
    'The upstream is a loopback, private or link-local address and this installation does not allow those (systems.allowPrivateUpstreams).',
  ),
  credentialUnavailable: def(
    'credential_unavailable',
    503,
    'upstream credential unavailable',
    'The process serving this write cannot resolve the credential the system names (a variable or file it lacks, or one it is not allowed to read); nothing was sent.',
  ),

  // gate-proxy's own refusals of a request before any decision (docs/proxy.md)
  notEnrolled: def(
    'not_enrolled',
    403,
    'not an enrolled system: writegate forwards only to enrolled upstreams',
    "gate-proxy serves no such system: it does not exist or is another tenant's, and the answer is the same.",
  ),
  remoteClient: def(
    'remote_client',
    403,
    "gate-proxy serves its own pod's agents only",
    "gate-proxy: the connection reached the proxy at a non-loopback address (another pod, by this pod's IP), which would act as the proxy's tenant with its upstream credentials. Only /healthz and /readyz answer such clients; CONNECT and the TLS port close them. proxy.remoteClients: true serves them (a proxy shared on purpose).",
  ),
  tunnelRefused: def(
    'tunnel_refused',
    403,
    'CONNECT tunnels are not gated and are refused for this host',
    'gate-proxy: a CONNECT to a host not on the pass-through list (proxy.passthrough), or to a host and port an enrolled system is served at (gated through interception, or refused: never tunnelled), or to an enrolled host the interception CA may not vouch for: a tunnel is opaque, so it would be ungated. The connection is then closed.',
  ),
  unmappedRoute: def(
    'unmapped_route',
    403,
    'unmapped write',
    'gate-proxy: no route of the system maps this write (or, on a system whose reads are gated, this read) to a verb, so it cannot be decided and is refused.',
  ),
  unmappedCall: def(
    'unmapped_call',
    403,
    'unmapped call: no route of the system maps this tool call or mutation',
    'gate-proxy: an MCP tool call or GraphQL mutation field no route of the system maps to a verb (or, on a system whose reads are gated, a read call). The whole request is refused.',
  ),
  unreadableCall: def(
    'unreadable_call',
    400,
    'the gate cannot read this request',
    'gate-proxy: an MCP or GraphQL request the gate cannot read fully, or that servers could read otherwise (malformed JSON or JSON-RPC, a document that does not parse, a persisted query it cannot resolve, a mutation sent by GET or HEAD, a member given twice, an encoded body), is refused rather than guessed at.',
  ),
  revoked: def(
    'revoked',
    403,
    'revoked: this agent may not reach the upstream',
    "gate-proxy: the proxy's key is revoked, disabled or on the sponsor's roster, so no request that would carry the injected credential is forwarded, reads included (`barred` says why); an ALLOWed write whose body was still arriving when the key was barred is abandoned upstream before its end (`receiptId` names the ALLOW).",
  ),
  misdirectedRequest: def(
    'misdirected_request',
    421,
    'misdirected request: the Host is not the host this TLS connection was opened for',
    'gate-proxy: inside an intercepted TLS connection, a request whose Host names another host than the one of its CONNECT (and certificate). Nothing is decided or forwarded.',
  ),
  toolsListUnfilterable: def(
    'tools_list_unfilterable',
    502,
    "the MCP server's answer could not be read to leave out the tools this agent may not call",
    'gate-proxy, on an MCP system with `filterToolsList`: the answer to a read was compressed, not JSON, over 16 MiB, or an event of its stream was not JSON, so the tools the agent may not call could not be taken out. It is not relayed (a stream already under way is cut).',
  ),
  methodOverride: def(
    'method_override',
    400,
    'a _method query parameter (method override) is not allowed',
    'gate-proxy, /v1/check and /v1/execute refuse a _method query parameter: the upstream could act on another method than the one gated.',
  ),
} as const satisfies Record<string, ErrorDef>

export type ErrorName = keyof typeof ERRORS

/** A domain error that the HTTP layer turns into `{error, code, ...detail}` with the def's status. */
/**
 * MCP: a tools/call gate-proxy does not forward is answered as a JSON-RPC error, so an agent
 * framework shows it to the model. The codes are in the range JSON-RPC leaves to servers
 * (-32000 to -32099), keyed by what the answer's `data.code` says: the decision (`denied`,
 * `step_up_required`) or the registry code of a refusal. A message the gate cannot read is
 * JSON-RPC's own Invalid Request. docs/errors.md lists them; a test keeps them in step.
 */
export const JSON_RPC_CODES: Readonly<Record<string, number>> = {
  denied: -32001,
  step_up_required: -32002,
  quota_exhausted: -32003,
  gate_unavailable: -32004,
  unmapped_call: -32005,
  revoked: -32006,
  credential_unavailable: -32007,
  not_enrolled: -32008,
  payload_too_large: -32009,
  tools_list_unfilterable: -32010,
  unreadable_call: -32600,
}

/** Any other refusal (none today): a generic server error. */
export const JSON_RPC_OTHER = -32000

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
