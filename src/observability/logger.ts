import { type Logger, type LoggerOptions, pino } from 'pino'

export type { Logger }

/** Masks anything shaped like a writegate secret (`svc_…`, `inv_…`, ALLOW tokens) in free text such as URLs. */
export function maskSecrets(text: string): string {
  return text
    .replace(/\b(svc_(?:sp_|badge_)?|inv_)[A-Za-z0-9]+/g, '$1***')
    .replace(/\bwgt_[A-Za-z0-9_.-]+/g, 'wgt_***')
}

interface RequestLike {
  id?: unknown
  method?: string
  url?: string
  routeOptions?: { url?: string }
  ip?: string
}

interface ReplyLike {
  statusCode?: number
}

/**
 * Explicit serializers: a request is logged as method, masked path (no query string)
 * and route, never its headers or body, so credentials cannot reach the log.
 */
export const serializers = {
  req(req: RequestLike) {
    const url = typeof req.url === 'string' ? req.url.split('?')[0] : undefined
    return {
      id: req.id,
      method: req.method,
      url: url === undefined ? undefined : maskSecrets(url),
      route: req.routeOptions?.url,
      ip: req.ip,
    }
  },
  res(res: ReplyLike) {
    return { statusCode: res.statusCode }
  },
  err(err: Error & { code?: unknown; statusCode?: unknown }) {
    return {
      type: err.name,
      message: maskSecrets(String(err.message)),
      code: err.code,
      statusCode: err.statusCode,
      stack: err.stack ? maskSecrets(err.stack) : undefined,
    }
  },
}

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  const options: LoggerOptions = {
    level,
    base: { service: 'writegate' },
    serializers,
    // Belt and braces: even if a header object slips into a log call, these never print.
    redact: {
      paths: [
        'headers.authorization',
        'req.headers.authorization',
        '*.authorization',
        '*.apiKey',
        '*.sponsorToken',
        '*.token',
        '*.totpCode',
        '*.secret',
        '*.password',
      ],
      censor: '[redacted]',
    },
  }
  return destination ? pino(options, destination) : pino(options)
}
