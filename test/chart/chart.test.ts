import { createHash, createPrivateKey, X509Certificate } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { evaluate as evaluateCel } from '@marcbachmann/cel-js'
import t, { type Test } from 'tap'
import { parse as parseYaml } from 'yaml'
import { loadSettings, parseSettings } from '../../src/config/load.js'
import { injectorOptions } from '../../src/injector/injector-process.js'
import { applyJsonPatch } from '../../src/injector/jsonpatch.js'
import type { Pod } from '../../src/injector/kube-types.js'
import { mutatePod } from '../../src/injector/pod-mutation.js'
import { WRITEGATE_CONTAINERS } from '../../src/injector/proxy-sidecar.js'
import { all, CHART, find, type KubeObject, NAMESPACE, RELEASE, renderChart } from '../helpers/chart.js'
import { helm } from '../helpers/helm.js'
import { imageEnv } from '../helpers/image.js'

const EXAMPLES = readdirSync(join(CHART, 'examples'))
  .filter((f) => f.endsWith('.yaml'))
  .sort()

/** Current API versions only: a removed or deprecated one (policy/v1beta1, autoscaling/v2beta2, …) fails. */
const KNOWN: Record<string, { namespaced: boolean }> = {
  'v1/ConfigMap': { namespaced: true },
  'v1/Secret': { namespaced: true },
  'v1/Service': { namespaced: true },
  'v1/ServiceAccount': { namespaced: true },
  'apps/v1/Deployment': { namespaced: true },
  'apps/v1/StatefulSet': { namespaced: true },
  'batch/v1/Job': { namespaced: true },
  'policy/v1/PodDisruptionBudget': { namespaced: true },
  'autoscaling/v2/HorizontalPodAutoscaler': { namespaced: true },
  'admissionregistration.k8s.io/v1/MutatingWebhookConfiguration': { namespaced: false },
  'admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration': { namespaced: false },
  'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy': { namespaced: false },
  'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding': { namespaced: false },
  'cert-manager.io/v1/Issuer': { namespaced: true },
  'cert-manager.io/v1/Certificate': { namespaced: true },
  'monitoring.coreos.com/v1/ServiceMonitor': { namespaced: true },
  'monitoring.coreos.com/v1/PodMonitor': { namespaced: true },
}
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/
const METRICS = [
  'writegate_decisions_total',
  'writegate_decision_duration_seconds',
  'writegate_gate_duration_seconds',
  'writegate_upstream_duration_seconds',
  'writegate_snapshot_version',
  'writegate_snapshot_age_seconds',
  'writegate_fail_closed_total',
  'writegate_commit_retries_total',
  'writegate_receipt_drain_backlog',
  'writegate_audit_appends_total',
]

const WORKLOADS = ['Deployment', 'StatefulSet', 'Job']

function podSpecOf(o: KubeObject) {
  return o.spec.template.spec
}

function matches(selector: Record<string, string>, labels: Record<string, string> | undefined): boolean {
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v)
}

/** The injector fixture's annotated pod, as the injector configured by these settings rewrites it. */
function injectedFixturePod(
  settings: ReturnType<typeof parseSettings>,
  fixture = 'review-annotated-pod.json',
): Pod {
  const review = JSON.parse(
    readFileSync(join(import.meta.dirname, '..', 'injector', 'fixtures', fixture), 'utf8'),
  )
  const m = mutatePod(review.request.object, injectorOptions(settings))
  if (m.outcome !== 'injected') throw new Error('expected an injection')
  return applyJsonPatch(review.request.object as Pod, m.patch)
}

/** The fixture pod as this rendering's injector leaves it: the proxy as a native sidecar, and as a container. */
function injectedPods(objects: KubeObject[]) {
  const settings = parseSettings(
    parseYaml(find(objects, 'ConfigMap', `${RELEASE}-writegate-config`).data['writegate.yaml']),
  )
  const sidecar = injectedFixturePod(settings)
  const classic = injectedFixturePod({
    ...settings,
    injector: { ...settings.injector, proxy: { ...settings.injector.proxy, nativeSidecar: false } },
  })
  return { settings, sidecar, classic }
}

function b64(s: string): string {
  return Buffer.from(s, 'base64').toString('utf8')
}

/** Every check that holds for any rendering of the chart. */
function checkObjects(t: Test, objects: KubeObject[]): void {
  const workloads = objects.filter((o) => WORKLOADS.includes(o.kind))
  for (const o of objects) {
    const id = `${o.kind} ${o.metadata?.name}`
    const known = KNOWN[`${o.apiVersion}/${o.kind}`]
    t.ok(known, `${id}: ${o.apiVersion} ${o.kind} is a current API`)
    t.match(o.metadata?.name, DNS_SUBDOMAIN, `${id}: a valid name`)
    if (known?.namespaced) t.equal(o.metadata.namespace, NAMESPACE, `${id}: in the release namespace`)
    else t.equal(o.metadata.namespace, undefined, `${id}: cluster-scoped`)
    t.equal(o.metadata.labels?.['app.kubernetes.io/instance'], RELEASE, `${id}: instance label`)
    t.equal(o.metadata.labels?.['app.kubernetes.io/managed-by'], 'Helm', `${id}: managed-by label`)
  }

  for (const o of workloads) {
    const id = `${o.kind} ${o.metadata.name}`
    const spec = podSpecOf(o)
    // A Service named `writegate` would otherwise give the pod WRITEGATE_PORT=tcp://… (test/cli/service-links.test.ts).
    t.equal(spec.enableServiceLinks, false, `${id}: no service-link variables`)
    // A rolling update that may not stop a pod before its replacement runs needs room for one
    // more: required anti-affinity (one per zone, one per node) can leave it nowhere to go.
    if (o.spec.strategy?.rollingUpdate?.maxUnavailable === 0)
      t.notOk(
        spec.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution,
        `${id}: no required anti-affinity with maxUnavailable 0`,
      )
    if (o.kind !== 'Job') {
      t.ok(
        matches(o.spec.selector.matchLabels, o.spec.template.metadata.labels),
        `${id}: selector matches its pods`,
      )
    }
    t.equal(spec.securityContext?.runAsNonRoot, true, `${id}: runs as non-root`)
    t.equal(spec.automountServiceAccountToken, false, `${id}: no API token mounted`)
    const volumes = new Set(
      [
        ...(spec.volumes ?? []),
        ...(o.spec.volumeClaimTemplates ?? []).map((v: KubeObject) => v.metadata),
      ].map((v: KubeObject) => v.name),
    )
    for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
      t.ok(c.image, `${id}/${c.name}: image`)
      t.ok(c.resources?.requests && c.resources?.limits, `${id}/${c.name}: requests and limits`)
      t.equal(c.securityContext?.allowPrivilegeEscalation, false, `${id}/${c.name}: no privilege escalation`)
      t.ok(c.securityContext?.capabilities?.drop?.includes('ALL'), `${id}/${c.name}: drops all capabilities`)
      for (const m of c.volumeMounts ?? [])
        t.ok(volumes.has(m.name), `${id}/${c.name}: volume ${m.name} exists`)
    }
  }
  for (const d of all(objects, 'Deployment')) {
    for (const c of podSpecOf(d).containers)
      t.equal(c.securityContext.readOnlyRootFilesystem, true, `${d.metadata.name}/${c.name}: read-only root`)
  }

  for (const s of all(objects, 'Service')) {
    t.match(s.metadata.name, DNS_LABEL, `Service ${s.metadata.name}: a DNS label`)
    const backends = workloads.filter(
      (w) => w.kind !== 'Job' && matches(s.spec.selector, w.spec.template.metadata.labels),
    )
    t.equal(backends.length, 1, `Service ${s.metadata.name} selects exactly one workload`)
    const ports = new Set(
      podSpecOf(backends[0])
        .containers.flatMap((c: KubeObject) => c.ports ?? [])
        .map((p: KubeObject) => p.name),
    )
    for (const p of s.spec.ports)
      t.ok(ports.has(p.targetPort), `Service ${s.metadata.name}: targetPort ${p.targetPort} exists`)
  }

  for (const pdb of all(objects, 'PodDisruptionBudget')) {
    const target = all(objects, 'Deployment').find((d) =>
      matches(pdb.spec.selector.matchLabels, d.spec.template.metadata.labels),
    )
    t.ok(target, `PDB ${pdb.metadata.name} covers a Deployment`)
    const hpa = all(objects, 'HorizontalPodAutoscaler').find(
      (h) => h.spec.scaleTargetRef.name === target?.metadata.name,
    )
    const replicas = hpa ? hpa.spec.minReplicas : target?.spec.replicas
    t.ok(pdb.spec.minAvailable < replicas, `PDB ${pdb.metadata.name}: a node drain can still evict one pod`)
  }

  const cp = find(objects, 'Deployment', `${RELEASE}-writegate`)
  t.ok(cp, 'the control-plane Deployment')
  const hpa = find(objects, 'HorizontalPodAutoscaler')
  if (hpa) {
    t.equal(hpa.spec.scaleTargetRef.kind, 'Deployment')
    t.equal(hpa.spec.scaleTargetRef.name, cp.metadata.name)
    t.ok(hpa.spec.minReplicas >= 2)
    t.equal(cp.spec.replicas, undefined, 'the HPA owns the replica count')
  } else {
    t.ok(cp.spec.replicas >= 2, 'at least two control-plane replicas')
  }
  t.match(cp.spec.template.metadata.annotations['checksum/config'], /^[0-9a-f]{64}$/)
  const cpEnv = Object.fromEntries(podSpecOf(cp).containers[0].env.map((e: KubeObject) => [e.name, e]))
  for (const name of ['WRITEGATE_DATABASE_URL', 'WRITEGATE_REDIS_URL'])
    t.ok(cpEnv[name]?.valueFrom?.secretKeyRef?.name, `${name} comes from a Secret`)
  t.match(cpEnv.WRITEGATE_MASTER_KEY_FILE?.value, /^\/var\/run\/writegate\/master-key\//)
  t.same(podSpecOf(cp).containers[0].args, ['start'])

  const job = find(objects, 'Job')
  t.same(
    podSpecOf(job).containers[0].args,
    ['migrate', '--wait', '300'],
    'the migration Job runs writegate migrate, waiting for a database still starting',
  )
  t.ok(job.spec.activeDeadlineSeconds > 300, 'within the time the Job may run')
  t.match(job.metadata.annotations['helm.sh/hook'], /^(pre|post)-install,pre-upgrade$/)

  // The settings both processes read are valid settings.
  const config = find(objects, 'ConfigMap', `${RELEASE}-writegate-config`)
  const settings = parseSettings(parseYaml(config.data['writegate.yaml']))
  t.equal(settings.server.port, 8080)
}

function checkWebhook(t: Test, objects: KubeObject[]): void {
  const webhookConfig = find(objects, 'MutatingWebhookConfiguration')
  t.ok(webhookConfig, 'a MutatingWebhookConfiguration')
  t.equal(webhookConfig.webhooks.length, 1)
  const hook = webhookConfig.webhooks[0]
  t.equal(hook.failurePolicy, 'Fail', 'fails closed')
  t.equal(hook.sideEffects, 'None')
  t.same(hook.admissionReviewVersions, ['v1'])
  t.same(hook.rules, [
    {
      operations: ['CREATE'],
      apiGroups: [''],
      apiVersions: ['v1'],
      resources: ['pods'],
      scope: 'Namespaced',
    },
  ])
  t.ok(hook.timeoutSeconds >= 1 && hook.timeoutSeconds <= 30)
  t.same(hook.namespaceSelector.matchLabels, { 'writegate.io/injection': 'enabled' })
  t.same(hook.namespaceSelector.matchExpressions[0], {
    key: 'kubernetes.io/metadata.name',
    operator: 'NotIn',
    values: [NAMESPACE, 'kube-system'],
  })

  // clientConfig.service is the injector Service, and its port reaches the webhook's container port.
  const svcRef = hook.clientConfig.service
  const svc = find(objects, 'Service', svcRef.name)
  t.ok(svc, `the webhook's Service ${svcRef.name} is rendered`)
  t.equal(svcRef.namespace, svc.metadata.namespace)
  t.equal(svcRef.path, '/mutate')
  const svcPort = svc.spec.ports.find((p: KubeObject) => p.port === svcRef.port)
  t.ok(svcPort, `Service port ${svcRef.port}`)
  const injector = all(objects, 'Deployment').find((d) =>
    matches(svc.spec.selector, d.spec.template.metadata.labels),
  )
  const container = podSpecOf(injector).containers[0]
  t.same(container.args, ['injector'])
  const containerPort = container.ports.find((p: KubeObject) => p.name === svcPort.targetPort)
  const settings = parseSettings(
    parseYaml(find(objects, 'ConfigMap', `${RELEASE}-writegate-config`).data['writegate.yaml']),
  )
  t.equal(containerPort.containerPort, settings.injector.port, 'the injector listens where the Service sends')
  t.equal(container.readinessProbe.httpGet.scheme, 'HTTPS')
  t.equal(container.readinessProbe.httpGet.path, '/healthz')

  // The certificate the injector serves is the one the settings name, from the Secret the webhook trusts.
  const tlsMount = container.volumeMounts.find((m: KubeObject) =>
    settings.injector.tls.certFile.startsWith(`${m.mountPath}/`),
  )
  t.ok(tlsMount, 'the TLS files are mounted where the settings say')
  const tlsSecretName = podSpecOf(injector).volumes.find((v: KubeObject) => v.name === tlsMount.name).secret
    .secretName
  const dnsName = `${svc.metadata.name}.${NAMESPACE}.svc`

  // The serving certificate (named as the injector's Service), not the chart's CA.
  const certificate = find(objects, 'Certificate', svc.metadata.name)
  if (certificate) {
    t.equal(
      webhookConfig.metadata.annotations['cert-manager.io/inject-ca-from'],
      `${NAMESPACE}/${certificate.metadata.name}`,
    )
    t.equal(hook.clientConfig.caBundle, undefined, 'cert-manager injects the CA')
    t.equal(
      certificate.spec.secretName,
      tlsSecretName,
      'the Certificate writes the Secret the injector mounts',
    )
    t.ok(certificate.spec.dnsNames.includes(dnsName), `the Certificate covers ${dnsName}`)
    const issuer = certificate.spec.issuerRef
    if (issuer.kind === 'Issuer') t.ok(find(objects, 'Issuer', issuer.name), 'its Issuer is rendered')
    const own = find(objects, 'Issuer', issuer.name)
    if (own) {
      // The chart's own chain: a CA (kept key) signs the serving certificate, so the CA the API
      // server trusts stays the same when the serving certificate is renewed.
      t.notOk(own.spec.selfSigned, 'the serving certificate is not self-signed')
      const ca = find(objects, 'Certificate', own.spec.ca?.secretName)
      t.ok(ca?.spec.isCA, 'it is issued by a CA Certificate of the chart')
      t.equal(ca?.spec.secretName, own.spec.ca?.secretName)
      t.equal(ca?.spec.privateKey.rotationPolicy, 'Never', "whose key survives the CA's renewals")
      t.ok(find(objects, 'Issuer', ca?.spec.issuerRef.name)?.spec.selfSigned, 'the CA is self-signed')
    }
    t.notOk(find(objects, 'Secret', tlsSecretName), 'no chart-made TLS Secret alongside cert-manager')
  } else {
    const secret = find(objects, 'Secret', tlsSecretName)
    t.ok(secret, 'the chart-generated TLS Secret')
    t.equal(secret.type, 'kubernetes.io/tls')
    t.equal(hook.clientConfig.caBundle, secret.data['ca.crt'], 'the webhook trusts the CA in the Secret')
    const ca = new X509Certificate(b64(hook.clientConfig.caBundle))
    const serving = new X509Certificate(b64(secret.data['tls.crt']))
    t.ok(ca.ca, 'caBundle is a CA')
    t.ok(serving.verify(ca.publicKey), 'the serving certificate is signed by that CA')
    t.ok(serving.checkIssued(ca))
    t.equal(serving.checkHost(dnsName), dnsName, `the serving certificate covers ${dnsName}`)
    t.ok(serving.checkPrivateKey(createPrivateKeyFrom(secret.data['tls.key'])), 'tls.key matches tls.crt')
  }
}

/** Whether a webhook's matchConditions (CEL, as the API server evaluates them) all hold for a request. */
function sent(hook: KubeObject, variables: Record<string, unknown>): boolean {
  return (hook.matchConditions as { expression: string }[]).every(
    (c) => evaluateCel(c.expression, variables) === true,
  )
}

/**
 * The guards on injected pods, served by the same injector as the injection: changes to them,
 * and exec or attach into writegate's containers. The pods are picked by their containers (a
 * label could be removed by a status update), so the conditions are evaluated here, with a CEL
 * implementation, against pods as the injector leaves them.
 */
function checkGuard(t: Test, objects: KubeObject[]): void {
  const inject = find(objects, 'MutatingWebhookConfiguration')
  const config = find(objects, 'ValidatingWebhookConfiguration')
  t.ok(config, 'a ValidatingWebhookConfiguration')
  t.same(
    config.webhooks.map((h: KubeObject) => h.name),
    ['guard.writegate.io', 'exec.writegate.io'],
  )
  t.same(config.metadata.annotations, inject.metadata.annotations, 'its CA injected the same way')
  for (const hook of config.webhooks) {
    t.equal(hook.failurePolicy, 'Fail', `${hook.name} fails closed`)
    t.equal(hook.sideEffects, 'None')
    t.same(hook.admissionReviewVersions, ['v1'])
    t.same(hook.clientConfig, inject.webhooks[0].clientConfig, 'the same injector, trusted the same way')
    t.same(hook.namespaceSelector.matchExpressions[0].values, [NAMESPACE, 'kube-system'])
    t.equal(hook.objectSelector, undefined, 'no label decides it')
  }
  const [guard, exec] = config.webhooks
  t.same(guard.rules, [
    {
      operations: ['UPDATE'],
      apiGroups: [''],
      apiVersions: ['v1'],
      resources: ['pods', 'pods/ephemeralcontainers', 'pods/resize'],
      scope: 'Namespaced',
    },
  ])
  const { sidecar, classic } = injectedPods(objects)
  t.ok(
    (sidecar.spec.initContainers ?? []).some((c) => c.name === 'writegate-proxy') &&
      classic.spec.containers.some((c) => c.name === 'writegate-proxy'),
    'the proxy as a native sidecar, and as a container',
  )
  const plain = structuredClone(sidecar)
  plain.spec.initContainers = []
  plain.spec.containers = plain.spec.containers.filter((c) => c.name !== 'writegate-proxy')
  t.ok(
    sent(guard, { oldObject: sidecar, object: sidecar }),
    'a pod with the proxy as a native sidecar is guarded',
  )
  t.ok(sent(guard, { oldObject: classic, object: classic }), 'so is one with the proxy as a container')
  const unlabelled = structuredClone(sidecar)
  delete unlabelled.metadata?.labels?.['writegate.io/proxy']
  t.ok(sent(guard, { oldObject: unlabelled, object: unlabelled }), 'with its label removed too')
  t.notOk(sent(guard, { oldObject: plain, object: plain }), 'a pod without the proxy is not sent')

  t.same(exec.rules, [
    {
      operations: ['CONNECT'],
      apiGroups: [''],
      apiVersions: ['v1'],
      resources: ['pods/exec', 'pods/attach'],
      scope: 'Namespaced',
    },
  ])
  for (const container of WRITEGATE_CONTAINERS)
    t.ok(sent(exec, { object: { kind: 'PodExecOptions', container } }), `an exec into ${container} is sent`)
  t.notOk(
    sent(exec, { object: { kind: 'PodExecOptions', container: 'agent' } }),
    "one into an agent's is not",
  )
  t.notOk(sent(exec, { object: { kind: 'PodExecOptions' } }), 'nor one naming no container')
}

/**
 * The API server's own policy (CEL, evaluated here with a CEL implementation): a pod annotated
 * for writegate that no proxy was injected into is refused wherever it is created.
 */
function checkInjectionPolicy(t: Test, objects: KubeObject[]): void {
  const policy = find(objects, 'ValidatingAdmissionPolicy')
  const binding = find(objects, 'ValidatingAdmissionPolicyBinding')
  t.ok(policy && binding, 'a ValidatingAdmissionPolicy and its binding')
  t.equal(binding.spec.policyName, policy.metadata.name)
  t.same(binding.spec.validationActions, ['Deny'])
  t.equal(policy.spec.failurePolicy, 'Fail')
  t.same(policy.spec.matchConstraints.resourceRules, [
    { operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'] },
  ])
  t.same(policy.spec.matchConstraints.namespaceSelector.matchExpressions[0].values, [
    NAMESPACE,
    'kube-system',
  ])
  const judged = (pod: Pod) => ({
    sent: sent(policy.spec, { object: pod }),
    admitted: (policy.spec.validations as { expression: string }[]).every(
      (v) => evaluateCel(v.expression, { object: pod }) === true,
    ),
  })
  const { settings, sidecar, classic } = injectedPods(objects)
  t.same(judged(sidecar), { sent: true, admitted: true }, 'injected, the proxy a native sidecar: admitted')
  t.same(judged(classic), { sent: true, admitted: true }, 'injected, the proxy a container: admitted')
  const missed = structuredClone(sidecar)
  missed.spec.initContainers = []
  missed.spec.containers = missed.spec.containers.filter((c) => c.name !== 'writegate-proxy')
  t.same(judged(missed), { sent: true, admitted: false }, 'annotated but not injected: refused')
  const enforced = injectedFixturePod(settings, 'review-enforce-pod.json')
  t.same(judged(enforced), { sent: true, admitted: true }, 'injected with the enforce rules: admitted')
  const unruled = structuredClone(enforced)
  unruled.spec.initContainers = (unruled.spec.initContainers ?? []).filter((c) => c.name !== 'writegate-init')
  t.same(judged(unruled), { sent: true, admitted: false }, 'enforce annotated, the rules missing: refused')
  // Found in review: a container of one's own named writegate-proxy passed.
  const lookalike = structuredClone(sidecar)
  for (const c of [...(lookalike.spec.initContainers ?? []), ...lookalike.spec.containers])
    if (c.name === 'writegate-proxy') c.image = 'busybox:1.36'
  t.same(judged(lookalike), { sent: true, admitted: false }, 'a writegate-proxy of another image: refused')
  const annotations = (a: Record<string, string> | undefined) => {
    const pod = structuredClone(missed)
    if (a) pod.metadata = { ...pod.metadata, annotations: a }
    else delete pod.metadata?.annotations
    return pod
  }
  t.same(judged(annotations({ 'writegate.io/enforce': 'true' })).admitted, false, 'enforce alone: refused')
  t.same(
    judged(annotations({ 'writegate.io/inject': ' TRUE ' })).admitted,
    false,
    'read as the injector reads it',
  )
  t.equal(
    judged(annotations({ 'writegate.io/inject': 'false' })).sent,
    false,
    'inject: "false" is not judged',
  )
  t.equal(judged(annotations({ team: 'billing' })).sent, false, 'a pod without the annotations is not')
  t.equal(judged(annotations(undefined)).sent, false, 'nor one without annotations')
}

function createPrivateKeyFrom(b64Key: string) {
  return createPrivateKey(b64(b64Key))
}

t.test('every example renders objects that are current, complete and consistent', async (t) => {
  t.ok(EXAMPLES.length >= 4, `examples: ${EXAMPLES.join(', ')}`)
  const rendered = await Promise.all(EXAMPLES.map((f) => renderChart(['-f', join(CHART, 'examples', f)])))
  EXAMPLES.forEach((file, i) => {
    t.test(file, async (t) => {
      const objects = rendered[i] as KubeObject[]
      checkObjects(t, objects)
      checkWebhook(t, objects)
      checkGuard(t, objects)
      checkInjectionPolicy(t, objects)
    })
  })
})

t.test('the examples cover the set-ups they name', async (t) => {
  const [minimal, certManager, dev, ha] = await Promise.all(
    ['minimal', 'cert-manager', 'dev-bundled', 'ha'].map((n) =>
      renderChart(['-f', join(CHART, 'examples', `${n}.yaml`)]),
    ),
  )
  t.notOk(find(minimal!, 'StatefulSet'), 'minimal: no bundled databases')
  t.notOk(find(minimal!, 'HorizontalPodAutoscaler'))
  t.ok(
    find(certManager!, 'Certificate') &&
      find(certManager!, 'ServiceMonitor') &&
      find(certManager!, 'PodMonitor'),
  )
  t.ok(find(ha!, 'HorizontalPodAutoscaler'), 'ha: an HPA')
  const haEnv = podSpecOf(find(ha!, 'Deployment', `${RELEASE}-writegate`)).containers[0].env.map(
    (e: KubeObject) => e.name,
  )
  t.ok(haEnv.includes('WRITEGATE_AUDIT_SIGNING_KEY_FILE') && haEnv.includes('WRITEGATE_SYSTEMS_FILE'))

  const redis = find(dev!, 'StatefulSet', `${RELEASE}-writegate-redis`)
  t.same(podSpecOf(redis).containers[0].args, [
    '--appendonly',
    'yes',
    '--appendfsync',
    'always',
    '--dir',
    '/data',
    '--requirepass',
    '$(REDIS_PASSWORD)',
  ])
  const redisEnv = Object.fromEntries(
    podSpecOf(redis).containers[0].env.map((e: KubeObject) => [e.name, e.valueFrom.secretKeyRef]),
  )
  for (const name of ['REDIS_PASSWORD', 'REDISCLI_AUTH'])
    t.same(redisEnv[name], { name: `${RELEASE}-writegate-redis`, key: 'password' }, `${name} from its Secret`)
  t.ok(find(dev!, 'StatefulSet', `${RELEASE}-writegate-postgresql`), 'dev: bundled PostgreSQL')
  const redisSecret = find(dev!, 'Secret', `${RELEASE}-writegate-redis`).stringData
  t.match(redisSecret.password, /^[A-Za-z0-9]{32}$/, 'a generated password')
  t.equal(
    redisSecret.url,
    `redis://:${redisSecret.password}@${RELEASE}-writegate-redis.${NAMESPACE}.svc:6379`,
    'in the URL, reachable from agent namespaces',
  )
  t.match(
    find(dev!, 'Job').metadata.annotations['helm.sh/hook'],
    /^post-install,pre-upgrade$/,
    'after the bundled database exists',
  )
  const key = find(dev!, 'Secret', `${RELEASE}-writegate-master-key`)
  t.equal(Buffer.from(b64(key.data['master.key']).trim(), 'base64').length, 32, 'a 32-byte master key')
  t.equal(key.metadata.annotations['helm.sh/resource-policy'], 'keep')
})

t.test(
  'Prometheus and Grafana: monitors that find their targets, a dashboard with every metric',
  async (t) => {
    const objects = await renderChart(['-f', join(CHART, 'examples', 'cert-manager.yaml')])
    const sm = find(objects, 'ServiceMonitor')
    const svc = all(objects, 'Service').find((s) => matches(sm.spec.selector.matchLabels, s.metadata.labels))
    t.equal(
      svc?.metadata.name,
      `${RELEASE}-writegate-metrics`,
      "the ServiceMonitor selects the control plane's metrics Service",
    )
    t.ok(
      svc.spec.ports.some((p: KubeObject) => p.name === sm.spec.endpoints[0].port),
      'on its metrics port',
    )
    t.equal(svc.spec.type, 'ClusterIP')
    const api = find(objects, 'Service', `${RELEASE}-writegate`)
    t.same(
      api.spec.ports.map((p: KubeObject) => p.name),
      ['http'],
      "the API's Service, which may be exposed, does not carry /metrics",
    )
    const exposed = await renderChart([
      '-f',
      join(CHART, 'examples', 'cert-manager.yaml'),
      '--set',
      'controlPlane.service.type=LoadBalancer',
    ])
    t.equal(find(exposed, 'Service', `${RELEASE}-writegate`).spec.type, 'LoadBalancer')
    t.equal(
      find(exposed, 'Service', `${RELEASE}-writegate-metrics`).spec.type,
      'ClusterIP',
      'an exposed API leaves /metrics inside the cluster',
    )
    t.equal(sm.metadata.labels.release, 'kube-prometheus-stack')

    // The PodMonitor selects what the injector produces: its label and its proxy's metrics port.
    const pm = find(objects, 'PodMonitor')
    const settings = parseSettings(
      parseYaml(find(objects, 'ConfigMap', `${RELEASE}-writegate-config`).data['writegate.yaml']),
    )
    const pod = injectedFixturePod(settings)
    t.ok(matches(pm.spec.selector.matchLabels, pod.metadata?.labels), 'the PodMonitor selects injected pods')
    t.same(pm.spec.namespaceSelector, { any: true })
    const proxy = pod.spec.initContainers?.find((c) => c.name === 'writegate-proxy')
    t.ok(
      proxy?.ports?.some((p) => p.name === pm.spec.podMetricsEndpoints[0].port),
      'on the proxy metrics port',
    )

    const cm = all(objects, 'ConfigMap').find((c) => c.metadata.labels?.grafana_dashboard === '1')
    t.ok(cm, 'a ConfigMap labelled grafana_dashboard: "1"')
    const dashboard = JSON.parse(cm.data['writegate.json'])
    const exprs = JSON.stringify(
      dashboard.panels.flatMap((p: KubeObject) => p.targets ?? []).map((x: KubeObject) => x.expr),
    )
    for (const metric of METRICS) t.ok(exprs.includes(metric), `the dashboard charts ${metric}`)
    t.match(exprs, /histogram_quantile\(0\.99, sum by \(le\) \(rate\(writegate_gate_duration_seconds_bucket/)
    t.match(exprs, /sum by \(decision\) \(rate\(writegate_decisions_total/)
    t.match(exprs, /sum by \(verb, decision\) \(rate\(writegate_decisions_total/)
    t.equal(
      cm.data['writegate.json'],
      readFileSync(join(CHART, 'dashboards', 'writegate.json'), 'utf8').trimEnd(),
    )
  },
)

t.test("the chart's settings give injected proxies their secrets, and agents none of them", async (t) => {
  const objects = await renderChart(['-f', join(CHART, 'examples', 'minimal.yaml')])
  const settings = parseSettings(
    parseYaml(find(objects, 'ConfigMap', `${RELEASE}-writegate-config`).data['writegate.yaml']),
  )
  t.equal(
    settings.injector.proxy.image,
    'registry.example.com/platform/writegate:0.1.0',
    'the proxy image follows image.*',
  )
  const pod = injectedFixturePod(settings)
  const secretVolumes = new Set((pod.spec.volumes ?? []).filter((v) => v.secret).map((v) => v.name))
  const proxy = pod.spec.initContainers?.find((c) => c.name === 'writegate-proxy')
  t.ok(
    proxy?.volumeMounts?.some((v) => secretVolumes.has(v.name)),
    'the proxy mounts its secrets',
  )
  for (const c of pod.spec.containers) {
    t.notOk(
      c.volumeMounts?.some((v) => secretVolumes.has(v.name) && v.name.startsWith('writegate-')),
      `${c.name}: no proxy secret`,
    )
    t.notOk(c.envFrom?.length, `${c.name}: no envFrom`)
    t.equal(c.env?.find((e) => e.name === 'HTTP_PROXY')?.value, 'http://127.0.0.1:15001')
  }
})

/** The settings a container's process loads: its plain variables over the image's, over the ConfigMap. */
function containerSettings(objects: KubeObject[], deployment: string) {
  const file = join(mkdtempSync(join(tmpdir(), 'wg-chart-settings-')), 'writegate.yaml')
  writeFileSync(file, find(objects, 'ConfigMap', `${RELEASE}-writegate-config`).data['writegate.yaml'])
  const container = podSpecOf(find(objects, 'Deployment', deployment)).containers[0]
  const env = Object.fromEntries(
    container.env.filter((e: KubeObject) => e.value !== undefined).map((e: KubeObject) => [e.name, e.value]),
  )
  return loadSettings({ ...imageEnv(), ...env, WRITEGATE_CONFIG: file })
}

t.test('the pods listen on every interface, and settings.*.host changes where, over the image', async (t) => {
  const base = ['-f', join(CHART, 'examples', 'minimal.yaml')]
  const [plain, changed] = await Promise.all([
    renderChart(base),
    renderChart([
      ...base,
      ...['--set', 'settings.server.host=::', '--set', 'settings.metrics.host=::1'],
      ...['--set', 'settings.injector.host=::'],
    ]),
  ])
  const cp = `${RELEASE}-writegate`
  const injector = `${RELEASE}-writegate-injector`
  t.equal(containerSettings(plain, cp).server.host, '::')
  t.equal(containerSettings(plain, cp).metrics.host, '::')
  t.equal(containerSettings(plain, injector).injector.host, '::')
  t.equal(containerSettings(changed, cp).server.host, '::', 'not shadowed by the image')
  t.equal(containerSettings(changed, cp).metrics.host, '::1')
  t.equal(containerSettings(changed, injector).injector.host, '::')
})

t.test('settings changes roll the pods; bad values fail with a clear message', async (t) => {
  const base = ['-f', join(CHART, 'examples', 'minimal.yaml')]
  const [a, b] = await Promise.all([
    renderChart(base),
    renderChart([...base, '--set', 'controlPlane.logLevel=debug']),
  ])
  const sum = (o: KubeObject[]) =>
    find(o, 'Deployment', `${RELEASE}-writegate`).spec.template.metadata.annotations['checksum/config']
  t.not(sum(a), sum(b), 'checksum/config follows the settings')
  const configText = (o: KubeObject[]) =>
    find(o, 'ConfigMap', `${RELEASE}-writegate-config`).data['writegate.yaml']
  t.not(configText(a), configText(b))
  t.equal(createHash('sha256').update(configText(a)).digest('hex').length, 64)

  const failures: [string[], RegExp][] = [
    [[], /externalDatabase\.existingSecret is required/],
    [['--set', 'externalDatabase.existingSecret=db'], /externalRedis\.existingSecret is required/],
    [
      ['--set', 'externalDatabase.existingSecret=db', '--set', 'externalRedis.existingSecret=r'],
      /masterKey\.existingSecret is required/,
    ],
    [[...base, '--set', 'controlPlane.replica=3'], /additional properties 'replica' not allowed|replica/],
    [[...base, '--set', 'controlPlane.replicas=1'], /minimum/],
    [[...base, '--set', 'redis.appendfsync=sometimes'], /appendfsync/],
    [[...base, '--set', 'injector.timeoutSeconds=60'], /timeoutSeconds/],
  ]
  const results = await Promise.all(
    failures.map(([args]) => helm(['template', RELEASE, CHART, '-n', NAMESPACE, ...args])),
  )
  failures.forEach(([args, pattern], i) => {
    const r = results[i]!
    t.not(r.code, 0, `fails: ${args.join(' ') || '(no values)'}`)
    t.match(r.stderr, pattern)
  })
})

t.test('helm lint --strict passes for every example', async (t) => {
  const results = await Promise.all(
    EXAMPLES.map((f) =>
      helm(['lint', '--strict', CHART, '-f', join(CHART, 'examples', f), '--namespace', NAMESPACE]),
    ),
  )
  EXAMPLES.forEach((f, i) => {
    const r = results[i]!
    t.equal(r.code, 0, `${f}: ${r.stdout}${r.stderr}`)
    t.match(r.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/)
  })
})

t.test('the longest release name Helm takes still makes pods (StatefulSet names within 52)', async (t) => {
  const release = `r${'x'.repeat(52)}` // 53, Helm's limit
  const objects = [
    ...(await renderChart(['-f', join(CHART, 'examples', 'dev-bundled.yaml')], release)),
    ...(await renderChart(['-f', join(CHART, 'examples', 'cert-manager.yaml')], release)),
  ]
  const sets = all(objects, 'StatefulSet')
  t.equal(sets.length, 2, 'the bundled PostgreSQL and Redis')
  for (const s of sets) {
    // Its pods are labelled controller-revision-hash=<name>-<10 characters>, at most 63.
    t.ok(s.metadata.name.length <= 52, `${s.metadata.name}: ${s.metadata.name.length} characters`)
    t.equal(s.spec.serviceName, s.metadata.name)
    t.ok(find(objects, 'Service', s.metadata.name), 'its Service has the same name')
  }
  // Service names are DNS labels; a Deployment's or Job's name is part of its pods' names.
  for (const o of objects.filter((o) => ['Service', ...WORKLOADS].includes(o.kind)))
    t.match(o.metadata.name, DNS_LABEL, `${o.kind} ${o.metadata.name}: a DNS label`)
  const cert = all(objects, 'Certificate').find((c) => !c.spec.isCA)
  t.equal(cert.spec.commonName, undefined, 'no commonName (cert-manager refuses one over 64 bytes)')
  t.ok(cert.spec.dnsNames.length > 0)
})

t.test(
  'a disruption budget that keeps every replica up is refused: no node drain could evict one',
  async (t) => {
    const renderMinimal = (set: readonly string[]) =>
      helm([
        'template',
        RELEASE,
        CHART,
        '-n',
        NAMESPACE,
        '-f',
        join(CHART, 'examples', 'minimal.yaml'),
        ...set.flatMap((s) => ['--set', s]),
      ])
    for (const [set, pattern] of [
      [
        ['injector.replicas=1'],
        /injector\.pdb\.minAvailable \(1\) must be below the injector's replicas \(1\)/,
      ],
      [['controlPlane.pdb.minAvailable=2'], /controlPlane\.pdb\.minAvailable \(2\) must be below/],
      [
        [
          'controlPlane.autoscaling.enabled=true',
          'controlPlane.autoscaling.minReplicas=2',
          'controlPlane.pdb.minAvailable=2',
        ],
        /controlPlane's replicas \(2\)/,
      ],
    ] as const) {
      const r = await renderMinimal(set)
      t.not(r.code, 0, set.join(' '))
      t.match(r.stderr, pattern)
    }
    for (const set of [
      ['injector.replicas=1', 'injector.pdb.enabled=false'],
      ['injector.pdb.minAvailable=50%'],
    ]) {
      const r = await renderMinimal(set)
      t.equal(r.code, 0, `${set.join(' ')}: ${r.stderr}`)
    }
  },
)
