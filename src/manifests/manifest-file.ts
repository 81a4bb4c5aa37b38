import type { KeyObject } from 'node:crypto'
import { z } from 'zod'
import { manifestSignatureValid } from '../core/signed-manifest.js'
import type { ManifestEntry } from '../store/ports/manifests.js'

const entrySchema = z
  .object({
    repoId: z.string().min(1).max(256),
    commitSha: z.string().regex(/^[0-9a-f]{7,64}$/, 'expected a hex commit id'),
    scannerVersion: z.string().min(1).max(64),
    createdAt: z.number().int().min(0),
  })
  .strict()

const documentSchema = z
  .object({
    tenantId: z.string().min(1).max(64),
    entries: z.array(entrySchema).min(1).max(100_000),
    signature: z.string(),
  })
  .strict()

/** A manifest file that cannot be imported; the message is one line. */
export class ManifestFileError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'ManifestFileError'
  }
}

/** Checks the scanner's signature first, then the shape. Throws ManifestFileError; stores nothing. */
export function parseSignedManifest(
  text: string,
  scannerKey: KeyObject,
): { tenantId: string; entries: ManifestEntry[] } {
  let doc: unknown
  try {
    doc = JSON.parse(text)
  } catch {
    throw new ManifestFileError('not JSON')
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
    throw new ManifestFileError('expected a JSON object {tenantId, entries, signature}')
  }
  if (!manifestSignatureValid(scannerKey, doc as Record<string, unknown>)) {
    throw new ManifestFileError('bad signature: not signed by the configured scanner key')
  }
  const parsed = documentSchema.safeParse(doc)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    const where = issue?.path.length ? `${issue.path.join('.')}: ` : ''
    throw new ManifestFileError(`invalid manifest: ${where}${issue?.message ?? 'invalid'}`)
  }
  return { tenantId: parsed.data.tenantId, entries: parsed.data.entries }
}
