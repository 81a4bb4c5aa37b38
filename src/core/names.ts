/** Naming rules from interface.md, as pure predicates. */

const PRINCIPAL_NAME = /^[A-Za-z0-9 ._-]{1,64}$/

/** 1-64 of letters, digits, spaces, hyphens, underscores, periods; at least one letter or digit. */
export function isValidPrincipalName(name: string): boolean {
  return PRINCIPAL_NAME.test(name) && /[A-Za-z0-9]/.test(name)
}

/** Uniqueness among live principals is case-insensitive. */
export function principalNameKey(name: string): string {
  return name.toLowerCase()
}

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,255}$/

export function normalizeEmail(email: string): string | null {
  const e = email.trim().toLowerCase()
  if (e.length > 254 || !EMAIL.test(e)) return null
  const domain = e.slice(e.indexOf('@') + 1)
  if (!/^[a-z0-9-]+(\.[a-z0-9-]+)+$/.test(domain)) return null
  return e
}
