import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { ConfigError } from '../config/load.js'
import type { Settings } from '../config/schema.js'
import { createLogger, type Logger } from '../observability/logger.js'
import type { InjectorOptions } from './pod-mutation.js'
import { answerReview, type ReviewSummary } from './review-handler.js'
import { createWebhookServer, type TlsMaterial, type WebhookServer } from './webhook-server.js'

export interface Injector {
  readonly logger: Logger
  readonly webhook: WebhookServer
  /** On `host`, by default `injector.host`. */
  listen(host?: string): Promise<AddressInfo>
  close(): Promise<void>
}

export interface InjectorOverrides {
  logger?: Logger
}

export function serializeReview(r: ReviewSummary): ReviewSummary {
  return {
    uid: r.uid,
    namespace: r.namespace,
    pod: r.pod,
    outcome: r.outcome,
    ops: r.ops,
    message: r.message,
    dryRun: r.dryRun,
  }
}

/** The injector's view of its settings, in the domain's plain types. */
export function injectorOptions(settings: Settings): InjectorOptions {
  const s = settings.injector
  return {
    defaults: {
      proxySecret: s.defaults.proxySecret,
      routesConfigMap: s.defaults.routesConfigMap ?? null,
      tlsCaSecret: s.defaults.tlsCaSecret ?? null,
    },
    proxy: s.proxy,
    enforce: s.enforce,
  }
}

/** Reads the serving certificate and key; a missing or unreadable file stops start-up naming the setting. */
export function readTls(settings: Settings): TlsMaterial {
  const read = (file: string, setting: string, env: string) => {
    try {
      return readFileSync(file)
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message
      throw new ConfigError(`invalid setting ${setting} (${env}): cannot read ${file}: ${code}`)
    }
  }
  const certSetting = 'injector.tls.certFile (WRITEGATE_INJECTOR_TLS_CERT_FILE)'
  const keySetting = 'injector.tls.keyFile (WRITEGATE_INJECTOR_TLS_KEY_FILE)'
  const tls = {
    cert: read(settings.injector.tls.certFile, 'injector.tls.certFile', 'WRITEGATE_INJECTOR_TLS_CERT_FILE'),
    key: read(settings.injector.tls.keyFile, 'injector.tls.keyFile', 'WRITEGATE_INJECTOR_TLS_KEY_FILE'),
  }
  // Checked here, not at the first handshake: a pair that cannot serve would fail every review
  // (with failurePolicy Fail, every pod of the namespace), and a renewal must not swap one in.
  let certificate: X509Certificate
  try {
    certificate = new X509Certificate(tls.cert)
  } catch {
    throw new ConfigError(
      `invalid setting ${certSetting}: ${settings.injector.tls.certFile} is not a PEM certificate`,
    )
  }
  let key: KeyObject
  try {
    key = createPrivateKey(tls.key)
  } catch {
    throw new ConfigError(
      `invalid setting ${keySetting}: ${settings.injector.tls.keyFile} is not a PEM private key`,
    )
  }
  if (!certificate.checkPrivateKey(key))
    throw new ConfigError(
      `invalid setting ${keySetting}: the key does not match the certificate in ${settings.injector.tls.certFile}`,
    )
  return tls
}

/**
 * The injector's composition root: settings in, a webhook server out. The certificate is
 * re-read on an interval so a renewal (cert-manager rewrites the Secret in place) is picked
 * up without a restart; a renewal caught half-written keeps the old certificate.
 */
export function createInjector(settings: Settings, overrides: InjectorOverrides = {}): Injector {
  // An explicit serializer: a review is logged as these fields, whatever a call site hands in.
  const logger = (overrides.logger ?? createLogger(settings.log.level)).child(
    { component: 'injector' },
    { serializers: { review: serializeReview } },
  )
  const opts = injectorOptions(settings)
  let tls = readTls(settings)
  const webhook = createWebhookServer({ tls, logger, review: (body) => answerReview(body, opts) })

  const reload = () => {
    let next: TlsMaterial
    try {
      next = readTls(settings)
    } catch (err) {
      logger.warn({ err }, 'TLS files unreadable; keeping the current certificate')
      return
    }
    if (
      Buffer.compare(next.cert as Buffer, tls.cert as Buffer) === 0 &&
      Buffer.compare(next.key as Buffer, tls.key as Buffer) === 0
    )
      return
    try {
      webhook.setTls(next)
      tls = next
      logger.info('serving certificate reloaded')
    } catch (err) {
      logger.warn({ err }, 'new TLS files rejected; keeping the current certificate')
    }
  }
  const timer = setInterval(reload, settings.injector.tls.reloadSeconds * 1000)
  timer.unref()

  return {
    logger,
    webhook,
    listen: (host = settings.injector.host) => webhook.listen(settings.injector.port, host),
    async close() {
      clearInterval(timer)
      await webhook.close()
    },
  }
}
