import { generate, generateSecret, generateURI, verify } from 'otplib'

export const TOTP_PERIOD = 30

export interface TotpEnrolment {
  secret: string
  otpauthUrl: string
}

export function newTotpEnrolment(issuer: string, label: string): TotpEnrolment {
  const secret = generateSecret()
  return { secret, otpauthUrl: generateURI({ issuer, label, secret }) }
}

/**
 * Checks a code against the secret at `nowSeconds`, accepting one period of drift
 * either way. Returns the time step the code matched, so the caller can refuse a
 * replay (RFC 6238 §5.2: no step at or below the last accepted one), or null.
 */
export async function matchTotpStep(
  secret: string,
  code: string,
  nowSeconds: number,
): Promise<number | null> {
  if (!/^\d{6}$/.test(code)) return null
  const result = await verify({ secret, token: code, epoch: nowSeconds, epochTolerance: TOTP_PERIOD })
  if (!result.valid) return null
  // The functional API types the result for HOTP and TOTP alike; TOTP results carry timeStep.
  const step = (result as { timeStep?: unknown }).timeStep
  return typeof step === 'number' ? step : Math.floor(nowSeconds / TOTP_PERIOD)
}

/**
 * The code an authenticator shows for `secret` at `nowSeconds`: the same algorithm, digits and
 * period that {@link matchTotpStep} checks (otplib's TOTP defaults: SHA-1, 6 digits, 30 s).
 */
export function totpCode(secret: string, nowSeconds: number): Promise<string> {
  return generate({ secret, epoch: nowSeconds })
}
