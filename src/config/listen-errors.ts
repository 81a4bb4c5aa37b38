import { ConfigError, describeSetting } from './load.js'

/** The settings sections that choose a listening address. */
export type Listener = 'server' | 'proxy' | 'metrics' | 'injector' | 'proxy.tls'

/**
 * Why a server could not listen, blamed on the setting that chose its address: a port in use
 * on `<listener>.port`, an address this machine does not have on `<listener>.host`. Each
 * process opens several listeners, so the message must name the one that failed.
 */
export function listenError(listener: Listener, host: string, port: number, err: unknown): unknown {
  const code = (err as NodeJS.ErrnoException)?.code
  const at = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`
  // proxy.tls listens on proxy.host: its port is its own setting, its host the proxy's.
  const portPath = [...listener.split('.'), 'port']
  const hostPath = [listener.split('.')[0] as string, 'host']
  switch (code) {
    case 'EADDRINUSE':
      return new ConfigError(`invalid setting ${describeSetting(portPath)}: ${at} is in use`)
    case 'EACCES':
      return new ConfigError(
        `invalid setting ${describeSetting(portPath)}: ${at}: permission denied (ports below 1024 need privileges)`,
      )
    case 'EADDRNOTAVAIL':
    case 'EAFNOSUPPORT':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new ConfigError(
        `invalid setting ${describeSetting(hostPath)}: cannot listen on ${host}: not an address of this machine (${code})`,
      )
    default:
      return err
  }
}

/**
 * Runs `listen` on `host`, turning its failure into {@link listenError}. `::` (every address of
 * both families, what the image and the injected proxy use) falls back to `0.0.0.0` on a machine
 * without IPv6 (a node booted with ipv6.disable=1 refuses the family: EAFNOSUPPORT), where the
 * sidecar would otherwise never start and its pod's agent with it.
 */
export async function listenAs<T>(
  listener: Listener,
  host: string,
  port: number,
  listen: (host: string) => Promise<T>,
): Promise<T> {
  try {
    return await listen(host)
  } catch (err) {
    if (host === '::' && (err as NodeJS.ErrnoException)?.code === 'EAFNOSUPPORT')
      return listenAs(listener, '0.0.0.0', port, listen)
    throw listenError(listener, host, port, err)
  }
}
