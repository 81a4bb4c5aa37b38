import type { FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify'
import { ERRORS, WriteGateError } from '../../core/errors.js'
import { type Authenticator, bearerOf } from '../../identity/authenticator.js'
import type { Caller, KeyCaller, SponsorCaller } from '../../identity/caller.js'
import { describeAuth } from './openapi-auth.js'

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller | null
  }
}

export interface KeyAccess {
  /** `admin` endpoints refuse agent-scoped keys with 403 (contract §2 "Key scopes"). */
  scope: 'admin' | 'agent'
  /**
   * Only POST /v1/check answers a dead key (with DENY, on record): its decision judges the key's
   * standing under the tenant's snapshot, so the key is only identified here (cached).
   */
  allowDead?: boolean
}

/** K endpoints: anything but a live API key (a sponsor or badge token included) gets 401 `unknown API key`. */
export function requireKey(auth: Authenticator, access: KeyAccess): onRequestAsyncHookHandler {
  const hook = async (req: FastifyRequest, _reply: FastifyReply) => {
    const bearer = bearerOf(req.headers.authorization)
    // A route that answers dead keys decides their standing under the snapshot: identity is enough.
    const caller = access.allowDead ? await auth.keyIdentity(bearer) : await auth.apiKey(bearer)
    if (!caller || (caller.dead && !access.allowDead)) throw new WriteGateError(ERRORS.unknownApiKey)
    if (access.scope === 'admin' && caller.scope !== 'admin')
      throw new WriteGateError(ERRORS.insufficientScope)
    if (access.scope === 'admin') {
      const barred = await auth.rosterBar(caller)
      if (barred) throw new WriteGateError(ERRORS.keyBarred, { barred })
    }
    req.caller = caller
  }
  return describeAuth(hook, { scheme: 'apiKey', adminOnly: access.scope === 'admin' })
}

/** S endpoints: anything but the tenant's sponsor token (an API key included) gets 401 `sponsor token required`. */
export function requireSponsor(auth: Authenticator): onRequestAsyncHookHandler {
  const hook = async (req: FastifyRequest, _reply: FastifyReply) => {
    const caller = await auth.sponsor(bearerOf(req.headers.authorization))
    if (!caller) throw new WriteGateError(ERRORS.sponsorTokenRequired)
    req.caller = caller
  }
  return describeAuth(hook, { scheme: 'sponsorToken', adminOnly: false })
}

export function keyCaller(req: FastifyRequest): KeyCaller {
  const c = req.caller
  if (c?.kind !== 'key') throw new Error('route is missing requireKey')
  return c
}

export function sponsorCaller(req: FastifyRequest): SponsorCaller {
  const c = req.caller
  if (c?.kind !== 'sponsor') throw new Error('route is missing requireSponsor')
  return c
}
