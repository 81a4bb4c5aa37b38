/**
 * The slice of the Kubernetes Pod API the injector reads and writes. Plain types: the
 * admission edge validates incoming objects (admission-review.ts) before they reach here.
 */

export interface EnvVar {
  name: string
  value?: string
  valueFrom?: Record<string, unknown>
}

export interface EnvFromSource {
  secretRef?: { name: string; optional?: boolean }
  configMapRef?: { name: string; optional?: boolean }
  prefix?: string
}

export interface ContainerPort {
  containerPort: number
  name?: string
  protocol?: string
}

export interface VolumeMount {
  name: string
  mountPath: string
  readOnly?: boolean
}

export interface Probe {
  httpGet: { path: string; port: number | string }
  initialDelaySeconds?: number
  periodSeconds?: number
  timeoutSeconds?: number
  failureThreshold?: number
}

export interface Container {
  name: string
  image?: string
  imagePullPolicy?: string
  command?: string[]
  args?: string[]
  env?: EnvVar[]
  envFrom?: EnvFromSource[]
  ports?: ContainerPort[]
  volumeMounts?: VolumeMount[]
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> }
  securityContext?: Record<string, unknown>
  livenessProbe?: Probe
  readinessProbe?: Probe
  startupProbe?: Probe
  /** `Always` on an init container makes it a native sidecar (Kubernetes 1.29+). */
  restartPolicy?: string
}

/** A container added to a running pod (`kubectl debug`), through the pods/ephemeralcontainers subresource. */
export interface EphemeralContainer extends Container {
  /** The container whose process namespace it joins. */
  targetContainerName?: string
}

export interface Volume {
  name: string
  configMap?: { name: string; items?: { key: string; path: string }[] }
  secret?: { secretName: string; items?: { key: string; path: string }[]; defaultMode?: number }
  emptyDir?: { medium?: string; sizeLimit?: string }
  projected?: { sources?: { secret?: { name?: string } }[] }
}

export interface PodSpec {
  containers: Container[]
  initContainers?: Container[]
  ephemeralContainers?: EphemeralContainer[]
  volumes?: Volume[]
  hostNetwork?: boolean
  /** One process namespace for every container: each can see the others' processes, and their files through /proc. */
  shareProcessNamespace?: boolean
  /** The node's process namespace: the pod sees every process on the node, the proxy's included. */
  hostPID?: boolean
  securityContext?: { runAsUser?: number }
  /** Nameservers the pod names itself (with `dnsPolicy: None`, its only ones). */
  dnsConfig?: { nameservers?: string[] }
}

export interface ObjectMeta {
  name?: string
  generateName?: string
  namespace?: string
  labels?: Record<string, string>
  annotations?: Record<string, string>
}

export interface Pod {
  apiVersion?: string
  kind?: string
  metadata?: ObjectMeta
  spec: PodSpec
}
