import type { KeyObject } from 'node:crypto'
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import { CHECKPOINT_ALGORITHM } from '../core/checkpoint.js'
import { publicKeyId, publicKeyPem, rawPublicKey } from '../core/ed25519.js'

export function auditKeyRoutes(deps: { signingKey: KeyObject }): FastifyPluginAsyncZod {
  const body = {
    algorithm: CHECKPOINT_ALGORITHM,
    keyId: publicKeyId(deps.signingKey),
    publicKeyPem: publicKeyPem(deps.signingKey),
    publicKeyBase64: rawPublicKey(deps.signingKey).toString('base64'),
    signedMessage: 'UTF-8 bytes of the RFC 8785 (JCS) text of {tenantId, seq, hash, at}',
    signatureEncoding: 'base64',
  }
  return async (app) => {
    app.get(
      '/v1/audit/public-key',
      {
        schema: {
          summary: 'The public key that verifies audit checkpoints',
          description:
            'No credential. Checkpoints are Ed25519 signatures (base64) over the JCS of {tenantId, seq, hash, at}; `keyId` is the first 16 hex digits of SHA-256 of the raw key. Pin it outside writegate and pass it to `writegate verify --public-key`.',
          response: {
            200: z.object({
              algorithm: z.string(),
              keyId: z.string(),
              publicKeyPem: z.string(),
              publicKeyBase64: z.string(),
              signedMessage: z.string(),
              signatureEncoding: z.string(),
            }),
          },
        },
      },
      async () => body,
    )
  }
}
