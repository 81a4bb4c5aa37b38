import { randomBase62 } from './random.js'

/** Prefixes of every opaque identifier the service issues. Ids are never parsed beyond their prefix. */
export const ID_PREFIX = {
  tenant: 'ten_',
  principal: 'prn_',
  key: 'key_',
  receipt: 'rcp_',
  grant: 'grt_',
  lease: 'lse_',
  token: 'tok_',
  action: 'act_',
  badge: 'bdg_',
} as const

export type IdKind = keyof typeof ID_PREFIX

export function newId(kind: IdKind): string {
  return `${ID_PREFIX[kind]}${randomBase62(22)}`
}

/** True when the string has the shape of an id of this kind (used to reject garbage early, never to trust it). */
export function looksLikeId(kind: IdKind, s: string): boolean {
  const p = ID_PREFIX[kind]
  return s.startsWith(p) && s.length > p.length && s.length <= 64 && /^[0-9A-Za-z]+$/.test(s.slice(p.length))
}
