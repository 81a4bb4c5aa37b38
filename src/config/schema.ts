import { isIP } from 'node:net'
import { z } from 'zod'

const port = z.coerce.number().int().min(0).max(65535)

/** `loopback`, an IP address or a CIDR; handed to proxy-addr as fastify's trustProxy. */
const trustEntry = z.string().refine(
  (s) => {
    if (['loopback', 'linklocal', 'uniquelocal'].includes(s)) return true
    const [addr, bits, ...rest] = s.split('/')
    if (rest.length > 0 || !addr || isIP(addr) === 0) return false
    if (bits === undefined) return true
    const n = Number(bits)
    return Number.isInteger(n) && n >= 0 && n <= (isIP(addr) === 4 ? 32 : 128)
  },
  { message: 'expected loopback, an IP address or a CIDR' },
)

const logLevel = z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])

export const settingsSchema = z
  .object({
    server: z
      .object({
        host: z.string().min(1).default('0.0.0.0'),
        port: port.default(8080),
        /** Client IPs are the socket address unless the peer is one of these (X-Forwarded-For is then honoured). */
        trustProxy: z.array(trustEntry).default([]),
        publicUrl: z.url().optional(),
      })
      .strict()
      .prefault({}),
    proxy: z
      .object({
        port: port.default(15001),
        host: z.string().min(1).default('0.0.0.0'),
      })
      .strict()
      .prefault({}),
    metrics: z
      .object({
        port: port.default(9464),
        host: z.string().min(1).default('0.0.0.0'),
      })
      .strict()
      .prefault({}),
    database: z
      .object({
        /** `postgres://…` for a server, `memory://` for in-memory PGlite; unset means PGlite under dataDir. */
        url: z
          .string()
          .refine((s) => s === 'memory://' || /^postgres(ql)?:\/\//.test(s), {
            message: 'expected postgres://…, postgresql://… or memory://',
          })
          .optional(),
        maxConnections: z.coerce.number().int().min(1).max(200).default(10),
      })
      .strict()
      .prefault({}),
    dataDir: z.string().min(1).default('./.writegate'),
    redis: z
      .object({
        /** Unset means single-process, in-memory hot state. */
        url: z
          .string()
          .refine((s) => /^rediss?:\/\//.test(s), { message: 'expected redis://… or rediss://…' })
          .optional(),
        keyPrefix: z
          .string()
          .regex(/^[A-Za-z0-9:_-]*$/)
          .default('wg:'),
      })
      .strict()
      .prefault({}),
    log: z
      .object({
        level: logLevel.default('info'),
      })
      .strict()
      .prefault({}),
    secrets: z
      .object({
        /** 32 random bytes (base64 or hex) from which token-signing and at-rest encryption keys are derived. */
        masterKeyFile: z.string().min(1).optional(),
      })
      .strict()
      .prefault({}),
    issuance: z
      .object({
        /** `proof` (default) requires proof for a second key of an email; `open` is the unsafe literal reading. */
        sameEmail: z.enum(['proof', 'open']).default('proof'),
        perIpPerHour: z.coerce.number().int().min(1).max(100000).default(10),
      })
      .strict()
      .prefault({}),
    quota: z
      .object({
        checksPerMonth: z.coerce.number().int().min(1).default(100),
      })
      .strict()
      .prefault({}),
    audit: z
      .object({
        /** PEM PKCS#8 Ed25519 private key that signs checkpoints; never stored in Postgres. */
        signingKeyFile: z.string().min(1).optional(),
        /** Every tenant whose head moved gets a signed checkpoint this often. */
        checkpointIntervalSeconds: z.coerce.number().int().min(1).max(86400).default(60),
        /** `: keepalive` comments on receipt streams at least this often (the contract says 15 s at most). */
        streamKeepaliveSeconds: z.coerce.number().int().min(1).max(15).default(15),
      })
      .strict()
      .prefault({}),
    manifests: z
      .object({
        /** PEM (SPKI) or raw base64 Ed25519 public key of the scanner whose manifests may be imported. */
        scannerPublicKeyFile: z.string().min(1).optional(),
      })
      .strict()
      .prefault({}),
  })
  .strict()

export type Settings = z.infer<typeof settingsSchema>
