import { z } from 'zod'

/** A request to approve one write (`POST /v1/grants`, and the portal's grant form). */
export const grantRequest = z
  .object({
    verb: z.string().min(1).max(128),
    target: z.string().max(1000).optional(),
    principalId: z.string().min(1).max(128).optional(),
    environment: z.string().max(64).optional(),
    ttlSeconds: z.number().int().optional(),
    reason: z.string().max(500).optional(),
  })
  .strict()
