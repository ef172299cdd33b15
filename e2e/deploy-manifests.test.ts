/**
 * The deployment files (deploy/, docker-compose.yml, k8s/), checked without Docker, kubectl or
 * kustomize: this machine has none of them, and nothing may download at test time.
 *
 * - The kustomize base and overlays are rendered here (`renderKustomization`: only the features
 *   the files use; anything else in a kustomization.yaml fails the test, so the renderer cannot
 *   silently drift from kustomize) and every object is validated against the Kubernetes 1.27
 *   OpenAPI schemas that `kubernetes-models` ships as precompiled validators.
 * - docker-compose.yml is validated against the Compose Specification JSON schema shipped by
 *   `dclint` (schemas/compose.schema.json).
 * - Then the project's own rules: probes, Prometheus scrape annotations, resources, non-root,
 *   the restricted Pod Security profile, one Deployment per service of the image's entrypoint,
 *   Services, HPAs, PDBs, the SSE ingress, the migration Job, and a compose file whose services
 *   are the ones the image knows. Every problem names the file and the object.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import ts from 'typescript';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { loadConfig } from '@agentry/runtime';
import { type Obj, isObj, obj, arr, str, at, type Resource, kindName, podSpec, containersOf, references, splitImage, parseEnvFile, renderKustomization } from './kustomize.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const read = (file: string): string => fs.readFileSync(path.resolve(root, file), 'utf8');

// ---------------------------------------------------------------------------------------------
// The image's entry point: which names it knows and what each runs.

interface EntrypointService {
  name: string;
  /** Path of the compiled file, relative to the image's /app. */
  entry: string;
}

function readEntrypoint(): { services: EntrypointService[]; listed: string[] } {
  const text = read('deploy/entrypoint.sh');
  const services = [...text.matchAll(/^\s*([a-z][a-z-]*)\)\s*entry=(\S+)\s*;;/gm)].map((m) => ({ name: m[1]!, entry: m[2]! }));
  const listed = (/^names="([^"]*)"/m.exec(text)?.[1] ?? '').split(/\s+/).filter(Boolean);
  return { services, listed };
}
const ENTRYPOINT = readEntrypoint();
const ENTRY_NAMES = new Set(ENTRYPOINT.services.map((s) => s.name));
/** Names of the image that are not cluster services, and why. */
const NOT_DEPLOYED: Record<string, string> = {
  standalone: 'embedded mode (PGlite, in-process bus) runs as one process, never as a cluster service',
  migrate: 'a one-shot Job / compose service, not a Deployment',
};
const CLUSTER_SERVICES = [...ENTRY_NAMES].filter((n) => !(n in NOT_DEPLOYED));
const HPA_SERVICES = ['gateway', 'agent-worker'];

/** The port each service listens on for HTTP or probes: its env, else the default in its main.ts. */
function servicePort(name: string, env: Record<string, string>): number | undefined {
  if (name === 'gateway') return Number(env.PORT ?? 9527);
  if (env.HEALTH_PORT) return Number(env.HEALTH_PORT);
  const main = path.join(root, 'services', name, 'src/main.ts');
  if (!fs.existsSync(main)) return undefined;
  const m = /process\.env\.HEALTH_PORT\s*\?\?\s*(\d+)/.exec(fs.readFileSync(main, 'utf8'));
  return m ? Number(m[1]) : undefined;
}

// ---------------------------------------------------------------------------------------------
// Kubernetes schemas (kubernetes-models 4.x: Kubernetes 1.27 OpenAPI, ajv-precompiled).

interface Validatable {
  validate(): void;
}
interface Model {
  make: (data: Obj) => Validatable;
  /** Module and interface of the TypeScript declaration, for the unknown-field check. */
  module: string;
  type: string;
}
const MODELS: Record<string, Model> = {
  'v1/ConfigMap': { make: (d) => new ConfigMap(d), module: 'v1/ConfigMap', type: 'IConfigMap' },
  'v1/Namespace': { make: (d) => new Namespace(d), module: 'v1/Namespace', type: 'INamespace' },
  'v1/Secret': { make: (d) => new Secret(d), module: 'v1/Secret', type: 'ISecret' },
  'v1/Service': { make: (d) => new Service(d), module: 'v1/Service', type: 'IService' },
  'v1/ServiceAccount': { make: (d) => new ServiceAccount(d), module: 'v1/ServiceAccount', type: 'IServiceAccount' },
  'apps/v1/Deployment': { make: (d) => new Deployment(d), module: 'apps/v1/Deployment', type: 'IDeployment' },
  'batch/v1/Job': { make: (d) => new Job(d), module: 'batch/v1/Job', type: 'IJob' },
  'autoscaling/v2/HorizontalPodAutoscaler': {
    make: (d) => new HorizontalPodAutoscaler(d),
    module: 'autoscaling/v2/HorizontalPodAutoscaler',
    type: 'IHorizontalPodAutoscaler',
  },
  'policy/v1/PodDisruptionBudget': { make: (d) => new PodDisruptionBudget(d), module: 'policy/v1/PodDisruptionBudget', type: 'IPodDisruptionBudget' },
  'networking.k8s.io/v1/Ingress': { make: (d) => new Ingress(d), module: 'networking.k8s.io/v1/Ingress', type: 'IIngress' },
};

function schemaProblems(resources: Resource[], context: string): string[] {
  const problems: string[] = [];
  for (const r of resources) {
    const label = `${r.source} (${context}): ${kindName(r.doc)}`;
    const model = MODELS[`${String(r.doc.apiVersion)}/${String(r.doc.kind)}`];
    if (!model) {
      problems.push(`${label}: ${String(r.doc.apiVersion)} ${String(r.doc.kind)} has no schema here (add it to MODELS in e2e/deploy-manifests.test.ts)`);
      continue;
    }
    try {
      model.make(r.doc).validate();
    } catch (err) {
      problems.push(`${label}: does not match the Kubernetes schema: ${(err as Error).message}`);
    }
  }
  return problems;
}

/**
 * The OpenAPI schemas allow unknown fields (the API server drops or, under kubectl's default
 * strict validation, refuses them), so a misspelt `readinesProbe` passes them. TypeScript's
 * excess-property check against the same models' declarations catches it: each object becomes
 * `const x: IDeployment = {...}` in a virtual file that the compiler checks.
 */
function unknownFieldProblems(resources: Resource[], context: string): string[] {
  const file = path.join(root, 'e2e', '__rendered_manifests__.ts');
  const known = resources.filter((r) => MODELS[`${String(r.doc.apiVersion)}/${String(r.doc.kind)}`]);
  const models = [...new Set(known.map((r) => MODELS[`${String(r.doc.apiVersion)}/${String(r.doc.kind)}`]!))];
  const lines = models.map((m) => `import type { ${m.type} } from 'kubernetes-models/${m.module}';`);
  const owners: Array<{ from: number; label: string }> = [];
  known.forEach((r, i) => {
    owners.push({ from: lines.length, label: `${r.source} (${context}): ${kindName(r.doc)}` });
    const m = MODELS[`${String(r.doc.apiVersion)}/${String(r.doc.kind)}`]!;
    lines.push(...`export const r${i}: ${m.type} = ${JSON.stringify(r.doc, null, 1)};`.split('\n'));
  });
  const text = lines.join('\n');
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.fileExists = (f) => f === file || fileExists.call(host, f);
  host.readFile = (f) => (f === file ? text : readFile.call(host, f));
  host.getSourceFile = (f, lang, ...rest) => (f === file ? ts.createSourceFile(f, text, lang) : getSourceFile.call(host, f, lang, ...rest));
  const program = ts.createProgram([file], options, host);
  const source = program.getSourceFile(file)!;
  return [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)].map((d) => {
    const line = d.start === undefined ? 0 : source.getLineAndCharacterOfPosition(d.start).line;
    const owner = [...owners].reverse().find((o) => o.from <= line);
    return `${owner?.label ?? `e2e (${context})`}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')} (near: ${lines[line]?.trim() ?? ''})`;
  });
}

// ---------------------------------------------------------------------------------------------
// Project rules for the rendered Kubernetes objects.

const labelsMatch = (selector: unknown, labels: unknown): boolean =>
  isObj(selector) && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => obj(labels)[k] === v);
const envOf = (c: Obj): Record<string, string> =>
  Object.fromEntries(arr(c.env).filter(isObj).filter((e) => typeof e.value === 'string').map((e) => [String(e.name), String(e.value)]));

/** `overlay`: the rendered set is complete (Secret and image tag given), so references must resolve. */
function clusterProblems(resources: Resource[], context: string, opts: { overlay: boolean; imageTag?: string }): string[] {
  const problems: string[] = [];
  const label = (r: Resource) => `${r.source} (${context}): ${kindName(r.doc)}`;
  const of = (kind: string) => resources.filter((r) => r.doc.kind === kind);
  const named = (kind: string, name: unknown) => resources.find((r) => r.doc.kind === kind && at(r.doc, 'metadata', 'name') === name);
  const deployments = of('Deployment');
  const jobs = of('Job');
  const hpas = of('HorizontalPodAutoscaler');
  const services = of('Service');

  // What each workload runs: the image's entrypoint with one of its service names.
  const runs = (r: Resource): string | undefined => str(at(podSpec(r.doc), 'containers', 0, 'args', 0));
  for (const name of CLUSTER_SERVICES) {
    const found = deployments.filter((d) => runs(d) === name);
    if (found.length !== 1) problems.push(`k8s (${context}): the image's service "${name}" (deploy/entrypoint.sh) needs exactly one Deployment, found ${found.length}`);
  }
  if (ENTRY_NAMES.has('migrate') && jobs.filter((j) => runs(j) === 'migrate').length !== 1) {
    problems.push(`k8s (${context}): the image's "migrate" needs exactly one Job running it`);
  }

  for (const r of [...deployments, ...jobs]) {
    const spec = podSpec(r.doc) ?? {};
    const podSec = obj(spec.securityContext);
    const isJob = r.doc.kind === 'Job';
    const declaredPorts = new Map<string, number>();
    for (const c of arr(spec.containers).filter(isObj)) {
      for (const p of arr(c.ports).filter(isObj)) {
        if (typeof p.containerPort === 'number') {
          declaredPorts.set(String(p.containerPort), p.containerPort);
          if (typeof p.name === 'string') declaredPorts.set(p.name, p.containerPort);
        }
      }
    }
    if (spec.automountServiceAccountToken !== false) problems.push(`${label(r)}: pod mounts a service-account token (set automountServiceAccountToken: false)`);
    if (!isJob && !labelsMatch(at(r.doc, 'spec', 'selector', 'matchLabels'), at(r.doc, 'spec', 'template', 'metadata', 'labels'))) {
      problems.push(`${label(r)}: spec.selector.matchLabels do not match the pod template's labels`);
    }
    if (isJob) {
      const restart = spec.restartPolicy;
      if (restart !== 'Never' && restart !== 'OnFailure') problems.push(`${label(r)}: restartPolicy must be Never or OnFailure`);
      if (typeof at(r.doc, 'spec', 'backoffLimit') !== 'number') problems.push(`${label(r)}: no spec.backoffLimit`);
      if (typeof at(r.doc, 'spec', 'ttlSecondsAfterFinished') !== 'number') problems.push(`${label(r)}: no spec.ttlSecondsAfterFinished (finished Jobs would pile up)`);
      if (opts.imageTag && !String(at(r.doc, 'metadata', 'name')).endsWith(`-${opts.imageTag}`)) {
        problems.push(`${label(r)}: a Job cannot be updated in place; its name must end with the image tag "-${opts.imageTag}" (patch in the overlay)`);
      }
    }

    for (const c of containersOf(spec)) {
      const cl = `${label(r)}: container "${String(c.name)}"`;
      const sec = obj(c.securityContext);
      const args = arr(c.args).map(String);
      if (c.command !== undefined) problems.push(`${cl}: sets command; the image's entrypoint must run (args: [<service>])`);
      if (!ENTRY_NAMES.has(args[0] ?? '')) problems.push(`${cl}: args[0] "${args[0] ?? ''}" is not a service of deploy/entrypoint.sh (${[...ENTRY_NAMES].join(', ')})`);
      for (const kind of ['requests', 'limits'] as const) {
        for (const resource of ['cpu', 'memory']) {
          if (at(c, 'resources', kind, resource) === undefined) problems.push(`${cl}: no resources.${kind}.${resource}`);
        }
      }
      if ((sec.runAsNonRoot ?? podSec.runAsNonRoot) !== true) problems.push(`${cl}: runAsNonRoot is not true`);
      const uid = sec.runAsUser ?? podSec.runAsUser;
      if (uid === 0) problems.push(`${cl}: runs as uid 0`);
      if (sec.allowPrivilegeEscalation !== false) problems.push(`${cl}: allowPrivilegeEscalation is not false`);
      if (sec.readOnlyRootFilesystem !== true) problems.push(`${cl}: readOnlyRootFilesystem is not true`);
      if (!arr(at(sec, 'capabilities', 'drop')).includes('ALL')) problems.push(`${cl}: capabilities.drop does not include ALL`);
      if ((at(sec, 'seccompProfile', 'type') ?? at(podSec, 'seccompProfile', 'type')) !== 'RuntimeDefault') problems.push(`${cl}: seccompProfile is not RuntimeDefault`);
      if (opts.overlay) {
        const image = splitImage(String(c.image ?? ''));
        if (!image.tag && !image.digest) problems.push(`${cl}: image "${String(c.image)}" has no tag`);
        if (image.tag === 'latest') problems.push(`${cl}: image "${String(c.image)}" uses the tag latest`);
      }
      if (isJob) continue;

      // Probes: liveness on /health, readiness on /ready, on the port the service listens on.
      const env = envOf(c);
      const expectedPort = servicePort(args[0] ?? '', env);
      for (const [probe, wanted] of [
        ['livenessProbe', '/health'],
        ['readinessProbe', '/ready'],
      ] as const) {
        const get = at(c, probe, 'httpGet');
        if (!isObj(get)) {
          problems.push(`${cl}: no ${probe}`);
          continue;
        }
        if (get.path !== wanted) problems.push(`${cl}: ${probe} checks ${String(get.path)}, not ${wanted}`);
        const port = declaredPorts.get(String(get.port));
        if (port === undefined) problems.push(`${cl}: ${probe} port ${String(get.port)} is not a declared container port`);
        else if (expectedPort !== undefined && port !== expectedPort) problems.push(`${cl}: ${probe} port ${port} is not where "${args[0]}" listens (${expectedPort})`);
      }

      // Scraped by Prometheus' pod discovery: /metrics on the port the service listens on.
      const scrape = obj(at(r.doc, 'spec', 'template', 'metadata', 'annotations'));
      const wantedScrape = { 'prometheus.io/scrape': 'true', 'prometheus.io/port': String(expectedPort), 'prometheus.io/path': '/metrics' };
      for (const [key, value] of Object.entries(wantedScrape)) {
        if (scrape[key] !== value) problems.push(`${label(r)}: pod annotation ${key} is ${JSON.stringify(scrape[key])}, not "${value}"`);
      }

      // The configuration file: AGENTRY_CONFIG inside a mounted ConfigMap that has that key.
      const configPath = env.AGENTRY_CONFIG;
      if (!configPath) problems.push(`${cl}: no AGENTRY_CONFIG`);
      else {
        const mount = arr(c.volumeMounts).filter(isObj).find((m) => configPath.startsWith(`${String(m.mountPath)}/`));
        const volume = arr(spec.volumes).filter(isObj).find((v) => v.name === mount?.name);
        const cmName = at(volume, 'configMap', 'name');
        if (!mount || !cmName) problems.push(`${cl}: AGENTRY_CONFIG ${configPath} is not in a mounted ConfigMap`);
        else if (opts.overlay) {
          const cm = named('ConfigMap', cmName);
          const key = configPath.slice(String(mount.mountPath).length + 1);
          if (!cm) problems.push(`${cl}: ConfigMap ${String(cmName)} does not exist`);
          else if (at(cm.doc, 'data', key) === undefined) problems.push(`${cl}: ConfigMap ${String(cmName)} has no key ${key} (AGENTRY_CONFIG)`);
        }
      }
    }

    // Every ConfigMap and Secret the pod names exists (and has the key asked for).
    if (opts.overlay) {
      for (const ref of references(spec)) {
        const target = named(ref.kind, ref.holder[ref.key]);
        if (!target) problems.push(`${label(r)}: refers to ${ref.kind} ${String(ref.holder[ref.key])}, which does not exist`);
        else if (ref.dataKey && at(target.doc, 'data', ref.dataKey) === undefined) problems.push(`${label(r)}: ${ref.kind} ${String(ref.holder[ref.key])} has no key ${ref.dataKey}`);
      }
    }

    if (!isJob) {
      // A Service selecting the pods, on a port the container declares.
      const podLabels = at(r.doc, 'spec', 'template', 'metadata', 'labels');
      const svc = services.find((s) => labelsMatch(at(s.doc, 'spec', 'selector'), podLabels));
      if (!svc) problems.push(`${label(r)}: no Service selects its pods`);
      else {
        for (const p of arr(at(svc.doc, 'spec', 'ports')).filter(isObj)) {
          if (!declaredPorts.has(String(p.targetPort ?? p.port))) problems.push(`${label(svc)}: targetPort ${String(p.targetPort ?? p.port)} is not a port of ${kindName(r.doc)}`);
        }
      }
      const hpa = hpas.find((h) => at(h.doc, 'spec', 'scaleTargetRef', 'name') === at(r.doc, 'metadata', 'name'));
      if (hpa && at(r.doc, 'spec', 'replicas') !== undefined) {
        problems.push(`${label(r)}: sets spec.replicas although ${kindName(hpa.doc)} scales it (every apply would reset the count)`);
      }
      if (HPA_SERVICES.includes(runs(r) ?? '') && !hpa) problems.push(`${label(r)}: "${runs(r)}" scales horizontally and needs a HorizontalPodAutoscaler`);
      if (!of('PodDisruptionBudget').some((p) => labelsMatch(at(p.doc, 'spec', 'selector', 'matchLabels'), podLabels))) {
        problems.push(`${label(r)}: no PodDisruptionBudget selects its pods`);
      }
    }
  }

  for (const h of hpas) {
    const ref = obj(at(h.doc, 'spec', 'scaleTargetRef'));
    if (ref.kind !== 'Deployment' || !named('Deployment', ref.name)) problems.push(`${label(h)}: scaleTargetRef ${String(ref.kind)}/${String(ref.name)} is not a Deployment here`);
    const min = Number(at(h.doc, 'spec', 'minReplicas') ?? 1);
    const max = Number(at(h.doc, 'spec', 'maxReplicas'));
    if (!(min >= 1 && min <= max)) problems.push(`${label(h)}: minReplicas ${min} / maxReplicas ${max}`);
  }
  for (const p of of('PodDisruptionBudget')) {
    const selector = at(p.doc, 'spec', 'selector', 'matchLabels');
    if (!deployments.some((d) => labelsMatch(selector, at(d.doc, 'spec', 'template', 'metadata', 'labels')))) problems.push(`${label(p)}: selects no Deployment's pods`);
  }

  // Ingress: every backend exists; the chat route streams (buffering off, an hour's timeouts).
  const chatPath = '/api/v1/chat/completions';
  let chatRoutes = 0;
  for (const ing of of('Ingress')) {
    const annotations = obj(at(ing.doc, 'metadata', 'annotations'));
    for (const rule of arr(at(ing.doc, 'spec', 'rules')).filter(isObj)) {
      for (const p of arr(at(rule, 'http', 'paths')).filter(isObj)) {
        const backend = obj(at(p, 'backend', 'service'));
        const svc = named('Service', backend.name);
        const portName = at(backend, 'port', 'name');
        const portNumber = at(backend, 'port', 'number');
        if (!svc) problems.push(`${label(ing)}: path ${String(p.path)} routes to Service ${String(backend.name)}, which does not exist`);
        else if (!arr(at(svc.doc, 'spec', 'ports')).filter(isObj).some((sp) => (portName !== undefined ? sp.name === portName : sp.port === portNumber))) {
          problems.push(`${label(ing)}: path ${String(p.path)} routes to a port Service ${String(backend.name)} does not have`);
        }
        const coversChat = p.path === chatPath || (p.pathType === 'Prefix' && chatPath.startsWith(String(p.path)) && p.path !== '/');
        if (!coversChat) continue;
        chatRoutes++;
        const gateway = deployments.find((d) => runs(d) === 'gateway');
        if (svc && gateway && !labelsMatch(at(svc.doc, 'spec', 'selector'), at(gateway.doc, 'spec', 'template', 'metadata', 'labels'))) {
          problems.push(`${label(ing)}: ${chatPath} does not route to the gateway`);
        }
        const a = (key: string) => str(annotations[`nginx.ingress.kubernetes.io/${key}`]);
        if (a('proxy-buffering') !== 'off') problems.push(`${label(ing)}: ${chatPath} needs nginx.ingress.kubernetes.io/proxy-buffering: "off" (SSE)`);
        for (const t of ['proxy-read-timeout', 'proxy-send-timeout']) {
          if (!(Number(a(t)) >= 3600)) problems.push(`${label(ing)}: ${chatPath} needs nginx.ingress.kubernetes.io/${t} of at least 3600 (long streams)`);
        }
      }
    }
  }
  if (chatRoutes === 0) problems.push(`k8s (${context}): no Ingress routes ${chatPath} with its own (streaming) settings`);

  if (opts.overlay) {
    const secret = resources.find((r) => r.doc.kind === 'Secret' && String(at(r.doc, 'metadata', 'name')).startsWith('agentry-secrets'));
    for (const key of ['AGENTRY_SECRET_KEY', 'DATABASE_URL', 'REDIS_URL']) {
      if (!secret || at(secret.doc, 'data', key) === undefined) problems.push(`k8s (${context}): the Secret agentry-secrets has no ${key}`);
    }
    const ns = resources.map((r) => at(r.doc, 'metadata', 'namespace')).find(Boolean);
    if (!named('Namespace', ns)) problems.push(`k8s (${context}): the namespace ${String(ns)} is not created by the overlay`);
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// docker-compose.yml

/** `${VAR:-default}` -> default, `${VAR:?msg}` and `${VAR}` -> `<VAR>`, `$$` -> `$`: as if nothing were set. */
function interpolate(v: unknown): unknown {
  if (typeof v === 'string') {
    return v.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}/g, (m, name: string | undefined, op: string | undefined, arg: string | undefined) =>
      m === '$$' ? '$' : op?.endsWith('-') ? (arg ?? '') : `<${name}>`,
    );
  }
  if (Array.isArray(v)) return v.map(interpolate);
  if (isObj(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, interpolate(x)]));
  return v;
}

function composeSchema(): Obj {
  const require = createRequire(import.meta.url);
  const dir = path.dirname(require.resolve('dclint/package.json'));
  const schema = JSON.parse(fs.readFileSync(path.join(dir, 'schemas/compose.schema.json'), 'utf8')) as Obj;
  // Draft 07 under an https URI ajv does not know by that name; the schema itself is plain draft 07.
  delete schema.$schema;
  return schema;
}

function composeSchemaProblems(compose: unknown): string[] {
  const validate = new Ajv({ allErrors: true, strict: false }).compile(composeSchema());
  if (validate(compose)) return [];
  return (validate.errors ?? []).map((e) => `docker-compose.yml: ${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`);
}

function composeProblems(compose: Obj): string[] {
  const problems: string[] = [];
  const services = obj(compose.services);
  // The Agentry services: built from the Dockerfile, or running one of the entrypoint's names.
  const agentry = Object.entries(services).filter(([, s]) => isObj(obj(s).build) || arr(obj(s).command).some((c) => ENTRY_NAMES.has(String(c))));
  const images = new Set(agentry.map(([, s]) => String(obj(s).image)));
  if (images.size !== 1) problems.push(`docker-compose.yml: the Agentry services must share one image, found ${[...images].join(', ')}`);
  const commands = new Map<string, string>();
  for (const [name, raw] of agentry) {
    const s = obj(raw);
    const where = `docker-compose.yml: service ${name}`;
    const command = arr(s.command).map(String);
    if (!ENTRY_NAMES.has(command[0] ?? '')) problems.push(`${where}: command ${JSON.stringify(s.command)} is not a service of deploy/entrypoint.sh`);
    else commands.set(command[0]!, name);
    if (s.entrypoint !== undefined) problems.push(`${where}: overrides the image's entrypoint`);
    if (at(s, 'build', 'dockerfile') !== 'deploy/Dockerfile') problems.push(`${where}: build.dockerfile is not deploy/Dockerfile`);
    const env = obj(s.environment);
    for (const key of ['AGENTRY_SECRET_KEY', 'DATABASE_URL', 'REDIS_URL']) if (!env[key] && !env[`${key}_FILE`]) problems.push(`${where}: no ${key} (or ${key}_FILE) in environment`);
    problems.push(...agentryHardeningProblems(where, s, obj(compose.secrets)));
    const config = str(env.AGENTRY_CONFIG);
    if (config && !arr(s.volumes).some((v) => String(v).split(':')[1] === config)) problems.push(`${where}: AGENTRY_CONFIG ${config} is not mounted`);
    if (command[0] === 'migrate') {
      if (s.restart !== 'no') problems.push(`${where}: a one-shot service needs restart: "no"`);
      continue;
    }
    if (command[0] === 'standalone') continue;
    // Long-running: a health check on its own port, started after the migration and healthy backends.
    const test = arr(at(s, 'healthcheck', 'test')).map(String);
    const port = servicePort(command[0] ?? '', Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)])));
    // `agentry healthcheck [PORT [PATH]]` (deploy/healthcheck.sh): PORT defaults to HEALTH_PORT, else PORT, as the service's own.
    const probe = test[1]?.endsWith('/agentry') && test[2] === 'healthcheck' ? { port: Number(test[3] ?? port), path: test[4] ?? '/ready' } : undefined;
    if (test.length === 0) problems.push(`${where}: no healthcheck`);
    else if (!(probe ? probe.port === port && probe.path === '/ready' : test.join(' ').includes(`:${port}/ready`))) problems.push(`${where}: healthcheck does not ask /ready on port ${port}`);
    const deps = obj(s.depends_on);
    for (const backend of ['postgres', 'redis']) {
      if (at(deps, backend, 'condition') !== 'service_healthy') problems.push(`${where}: depends_on ${backend} needs condition service_healthy`);
    }
    const migrate = commands.get('migrate') ?? 'migrate';
    if (at(deps, migrate, 'condition') !== 'service_completed_successfully') problems.push(`${where}: depends_on ${migrate} needs condition service_completed_successfully`);
    if (!String(s.stop_grace_period ?? '').match(/^\d+s$/) || parseInt(String(s.stop_grace_period), 10) < 26) {
      problems.push(`${where}: stop_grace_period must exceed server.shutdown_timeout_ms (25 s)`);
    }
  }
  for (const name of [...ENTRY_NAMES].filter((n) => n !== 'standalone')) {
    if (!commands.has(name)) problems.push(`docker-compose.yml: no service runs "${name}" (deploy/entrypoint.sh)`);
  }
  for (const [name, replicas] of [
    ['gateway', 2],
    ['agent-worker', 2],
  ] as const) {
    const service = commands.get(name);
    // `scale`: docker-compose 1.29 and Compose v2 both honour it.
    if (service && Number(at(services, service, 'scale') ?? at(services, service, 'deploy', 'replicas') ?? 1) < replicas) problems.push(`docker-compose.yml: service ${service} needs ${replicas} replicas`);
  }
  // Every service, backends and proxy included: no capability it does not add back, no privilege gain, a read-only root, bounded logs, limits.
  for (const [name, raw] of Object.entries(services)) {
    const s = obj(raw);
    const where = `docker-compose.yml: service ${name}`;
    if (!arr(s.cap_drop).map(String).includes('ALL')) problems.push(`${where}: needs cap_drop: [ALL]`);
    if (!arr(s.security_opt).map(String).some((o) => /^no-new-privileges(:true)?$/.test(o))) problems.push(`${where}: needs security_opt no-new-privileges`);
    if (s.read_only !== true) problems.push(`${where}: needs read_only: true`);
    if (!(at(s, 'logging', 'options', 'max-size') && at(s, 'logging', 'options', 'max-file'))) problems.push(`${where}: needs log rotation (logging.options max-size and max-file)`);
    if (!s.mem_limit || !s.cpus) problems.push(`${where}: needs mem_limit and cpus (both Compose v2 and 1.29 apply them)`);
    // Secrets are files: no value that looks like one in any environment.
    for (const [k, v] of Object.entries(obj(s.environment))) {
      if (/(PASSWORD|SECRET|TOKEN|_KEY)$/.test(k) && v !== undefined && v !== '') problems.push(`${where}: ${k} in the environment (docker inspect shows it); use ${k}_FILE and a compose secret`);
      if (k === 'DATABASE_URL' && /:\/\/[^/@]*:[^/@]*@/.test(String(v))) problems.push(`${where}: a password in DATABASE_URL; use DATABASE_PASSWORD_FILE`);
    }
  }
  if (Object.hasOwn(compose, 'name')) problems.push('docker-compose.yml: a top-level name: (docker-compose 1.29 refuses the file)');

  // Ports: only the proxy in front of the gateway publishes one.
  for (const [name, s] of Object.entries(services)) {
    if (obj(s).ports !== undefined && name !== 'proxy') problems.push(`docker-compose.yml: service ${name} publishes ports; only the gateway's proxy may`);
  }
  const proxy = obj(services.proxy);
  const nginxConf = arr(proxy.volumes).map(String).find((v) => v.endsWith('/etc/nginx/conf.d/default.conf:ro'));
  if (!nginxConf) problems.push('docker-compose.yml: service proxy does not mount deploy/nginx.conf');
  else {
    const conf = read(nginxConf.split(':')[0]!);
    const gatewayPort = servicePort('gateway', Object.fromEntries(Object.entries(obj(at(services, commands.get('gateway') ?? 'gateway', 'environment'))).map(([k, v]) => [k, String(v)])));
    if (!conf.includes(`http://${commands.get('gateway') ?? 'gateway'}:${gatewayPort}`)) problems.push(`${nginxConf.split(':')[0]}: does not proxy to the gateway on port ${gatewayPort}`);
    const chat = /location = \/api\/v1\/chat\/completions \{([^}]*)\}/.exec(conf)?.[1] ?? '';
    for (const directive of ['proxy_buffering off;', 'gzip off;', 'proxy_read_timeout 3600s;']) {
      if (!chat.includes(directive)) problems.push(`${nginxConf.split(':')[0]}: the chat location needs "${directive}"`);
    }
  }

  // Backends: health-checked; Redis on deploy/redis.conf.
  for (const backend of ['postgres', 'redis']) if (!at(services, backend, 'healthcheck', 'test')) problems.push(`docker-compose.yml: service ${backend} has no healthcheck`);
  const redisConf = arr(at(services, 'redis', 'volumes')).map(String).find((v) => v.startsWith('./deploy/redis.conf:'));
  const redisConfPath = redisConf?.split(':')[1];
  if (!redisConf || !arr(at(services, 'redis', 'command')).map(String).includes(redisConfPath ?? '')) problems.push('docker-compose.yml: redis does not run with deploy/redis.conf');
  return problems;
}

/**
 * An Agentry service as the pods run: uid 1000, an exec /tmp of a fixed size (the `bash` tool
 * runs scripts there), and each `*_FILE` variable pointing at a compose secret it mounts.
 */
function agentryHardeningProblems(where: string, s: Obj, secrets: Obj): string[] {
  const problems: string[] = [];
  if (s.user !== '1000:1000') problems.push(`${where}: needs user "1000:1000"`);
  const tmp = arr(s.tmpfs).map(String).find((t) => t.split(':')[0] === '/tmp');
  const opts = (tmp?.split(':')[1] ?? '').split(',');
  if (!tmp || !opts.includes('exec') || !opts.some((o) => /^size=\d+[kmg]?$/.test(o))) problems.push(`${where}: needs a tmpfs /tmp with exec and a size`);
  const mounted = new Set(arr(s.secrets).map((x) => (isObj(x) ? String(x.source) : String(x))));
  for (const [k, v] of Object.entries(obj(s.environment))) {
    if (!k.endsWith('_FILE')) continue;
    const secret = /^\/run\/secrets\/([^/]+)$/.exec(String(v))?.[1];
    if (!secret || !mounted.has(secret) || !isObj(secrets[secret])) problems.push(`${where}: ${k} ${String(v)} is not a compose secret it mounts`);
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// The Dockerfile and the npm workspaces.

interface Stage {
  name: string;
  from: string;
  lines: string[];
}

function dockerStages(text: string): { args: Record<string, string>; stages: Stage[] } {
  const logical = text.replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  const args: Record<string, string> = {};
  const stages: Stage[] = [];
  for (const line of logical) {
    const from = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/i.exec(line);
    if (from) stages.push({ name: from[2] ?? String(stages.length), from: from[1]!, lines: [] });
    else if (stages.length === 0) {
      const arg = /^ARG\s+([A-Za-z_]+)=(\S+)/.exec(line);
      if (arg) args[arg[1]!] = arg[2]!;
    } else stages.at(-1)!.lines.push(line);
  }
  return { args, stages };
}

function workspaces(): string[] {
  const pkg = JSON.parse(read('package.json')) as { workspaces: string[] };
  return pkg.workspaces.flatMap((w) =>
    w.endsWith('/*')
      ? fs
          .readdirSync(path.join(root, w.slice(0, -2)))
          .map((d) => `${w.slice(0, -2)}/${d}`)
          .filter((d) => fs.existsSync(path.join(root, d, 'package.json')))
      : [w],
  );
}

/** Workspace folders of the image's entry packages and of their @agentry dependencies, transitively. */
function runtimeWorkspaces(): string[] {
  const byName = new Map(workspaces().map((w) => [(JSON.parse(read(`${w}/package.json`)) as { name: string }).name, w]));
  const todo = ENTRYPOINT.services.map((s) => s.entry.split('/dist/')[0]!);
  const seen = new Set<string>();
  while (todo.length > 0) {
    const w = todo.pop()!;
    if (seen.has(w)) continue;
    seen.add(w);
    const deps = Object.keys((JSON.parse(read(`${w}/package.json`)) as { dependencies?: Record<string, string> }).dependencies ?? {});
    for (const d of deps) if (byName.has(d)) todo.push(byName.get(d)!);
  }
  return [...seen].sort();
}

function dockerfileProblems(text: string): string[] {
  const problems: string[] = [];
  const { args, stages } = dockerStages(text);
  const where = 'deploy/Dockerfile';
  const base = args.NODE_IMAGE ?? '';
  const major = /^node:(\d+)-bookworm-slim$/.exec(base)?.[1];
  if (!major || Number(major) % 2 !== 0 || Number(major) < 22) problems.push(`${where}: NODE_IMAGE ${base} is not a Node LTS bookworm-slim image`);
  const final = stages.at(-1);
  const stage = (name: string) => stages.find((s) => s.name === name);
  const has = (s: Stage | undefined, re: RegExp) => Boolean(s?.lines.some((l) => re.test(l)));
  const copiedManifests = (s: Stage | undefined) =>
    new Set((s?.lines ?? []).map((l) => /^COPY\s+(\S+)\/package\.json\s/.exec(l)?.[1]).filter((x): x is string => Boolean(x)));

  const build = stage('build');
  if (!has(build, /^RUN\b.*\bnpm ci\b(?!.*--omit)/)) problems.push(`${where}: the build stage must run npm ci with dev dependencies`);
  if (!has(build, /^RUN\b.*\bnpm run build\b/)) problems.push(`${where}: the build stage must run npm run build`);
  const buildManifests = copiedManifests(build);
  for (const w of workspaces()) if (!buildManifests.has(w)) problems.push(`${where}: the build stage does not copy ${w}/package.json before npm ci`);

  const deps = stages.find((s) => has(s, /^RUN\b.*\bnpm ci\b.*--omit=dev/));
  if (!deps) problems.push(`${where}: no stage runs npm ci --omit=dev`);
  const depManifests = copiedManifests(deps);
  for (const w of runtimeWorkspaces()) if (!depManifests.has(w)) problems.push(`${where}: stage ${deps?.name} does not copy ${w}/package.json (a runtime dependency of the image's services)`);
  const collected = (build?.lines.join('\n').match(/for pkg in ([^;]*);/)?.[1] ?? '').split(/\s+/).filter(Boolean);
  if (JSON.stringify([...collected].sort()) !== JSON.stringify([...depManifests].sort())) {
    problems.push(`${where}: the packages whose dist/ is collected (${collected.join(' ')}) differ from those installed in ${deps?.name} (${[...depManifests].join(' ')})`);
  }

  if (!final) return [...problems, `${where}: no stage`];
  if (!has(final, new RegExp(`^COPY\\s+--from=${deps?.name}\\s+/app/node_modules\\s`))) problems.push(`${where}: the runtime stage does not take node_modules from ${deps?.name}`);
  if (!has(final, /^COPY\s+deploy\/entrypoint\.sh\s+\/usr\/local\/bin\/agentry$/)) problems.push(`${where}: the runtime stage does not install deploy/entrypoint.sh as /usr/local/bin/agentry`);
  const user = final.lines.filter((l) => l.startsWith('USER ')).at(-1)?.slice(5).trim() ?? '';
  if (!/^[1-9]\d*(:\d+)?$/.test(user)) problems.push(`${where}: the runtime stage must end as a numeric non-root USER (runAsNonRoot checks it), found "${user}"`);
  const entrypoint = final.lines.find((l) => l.startsWith('ENTRYPOINT '));
  if (!entrypoint?.includes('"/usr/local/bin/agentry"')) problems.push(`${where}: ENTRYPOINT does not run /usr/local/bin/agentry`);
  return problems;
}

// ---------------------------------------------------------------------------------------------

const OVERLAYS = ['dev', 'prod'] as const;
const overlayTag = (overlay: string): string | undefined => {
  const k = obj(parseYaml(read(`k8s/overlays/${overlay}/kustomization.yaml`)));
  const img = arr(k.images).filter(isObj).find((i) => i.name === 'agentry');
  return img?.newTag === undefined ? undefined : String(img.newTag);
};
const renderOverlay = (overlay: string) => renderKustomization(path.join(root, 'k8s/overlays', overlay));
const loadCompose = (): Obj => obj(interpolate(parseYaml(read('docker-compose.yml'), { merge: true })));
const findResource = (resources: Resource[], kind: string, name: string): Resource => {
  const r = resources.find((x) => x.doc.kind === kind && at(x.doc, 'metadata', 'name') === name);
  if (!r) throw new Error(`${kind}/${name} not rendered`);
  return r;
};

describe('deployment files', () => {
  describe('image', () => {
    it("entrypoint: the standalone runs with npm start's node flags (PGlite's memory depends on them)", () => {
      const start = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts.start!;
      const npmFlags = start.split(/\s+/).filter((w) => w.startsWith('--'));
      const imageFlags = /if \[ "\$service" = standalone \]; then flags="([^"]*)"; fi/.exec(read('deploy/entrypoint.sh'))?.[1]?.split(/\s+/);
      expect(npmFlags).toContain('--liftoff-only');
      expect(imageFlags).toEqual(npmFlags);
    });

    it('entrypoint: its names are the six services and each runs a compiled main that exists', () => {
      expect(ENTRYPOINT.services.map((s) => s.name).sort()).toEqual(['agent-worker', 'channel-connector', 'gateway', 'migrate', 'scheduler', 'standalone']);
      expect(ENTRYPOINT.listed.sort()).toEqual([...ENTRY_NAMES].sort());
      for (const s of ENTRYPOINT.services) {
        const source = s.entry.replace('/dist/src/', '/src/').replace(/\.js$/, '.ts');
        expect(fs.existsSync(path.join(root, source)), `deploy/entrypoint.sh: ${s.name} runs ${s.entry}, but ${source} does not exist`).toBe(true);
      }
    });

    it('entrypoint: runs node on the chosen entry with the remaining arguments, refuses an unknown name', () => {
      const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-entrypoint-'));
      try {
        // A stand-in `node` that prints what it was asked to run.
        fs.writeFileSync(path.join(bin, 'node'), '#!/bin/sh\necho "node $*"\n', { mode: 0o755 });
        const run = (...argv: string[]) =>
          spawnSync('sh', [path.join(root, 'deploy/entrypoint.sh'), ...argv], {
            encoding: 'utf8',
            env: { PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}`, AGENTRY_HOME: '/app' },
          });
        for (const s of ENTRYPOINT.services) {
          const out = run(s.name, '--config', '/etc/agentry/config.yaml');
          expect({ name: s.name, status: out.status, stdout: out.stdout.trim() }).toEqual({
            name: s.name,
            status: 0,
            // The standalone's node flags are npm start's (the test above).
            stdout: `node ${s.name === 'standalone' ? '--liftoff-only --max-semi-space-size=4 ' : ''}/app/${s.entry} --config /etc/agentry/config.yaml`,
          });
        }
        const unknown = run('gatewy');
        expect(unknown.status).toBe(64);
        expect(unknown.stderr).toContain('unknown service "gatewy"');
        expect(unknown.stderr).toContain([...ENTRY_NAMES].join(' '));
        expect(run().status).toBe(64);
      } finally {
        fs.rmSync(bin, { recursive: true, force: true });
      }
    });

    it('Dockerfile: LTS slim base, dev build, production-only node_modules, every workspace, non-root', () => {
      expect(dockerfileProblems(read('deploy/Dockerfile'))).toEqual([]);
    });

    it('redis.conf: noeviction and AOF every second', () => {
      const conf = Object.fromEntries(
        read('deploy/redis.conf')
          .split('\n')
          .map((l) => l.trim())
          .filter((l) => l && !l.startsWith('#'))
          .map((l) => l.split(/\s+/, 2) as [string, string]),
      );
      expect(conf, 'deploy/redis.conf').toMatchObject({ 'maxmemory-policy': 'noeviction', appendonly: 'yes', appendfsync: 'everysec' });
    });

    it('the shipped configuration files load (compose and Kubernetes)', () => {
      for (const file of ['deploy/agentry.yaml', 'k8s/base/agentry.yaml']) {
        const loaded = loadConfig({ argv: ['--config', path.join(root, file)], env: { AGENTRY_ADMIN_PASSWORD: 'initial-admin-password' }, cwd: root });
        expect(loaded.config.security.requireAuth, `${file}: security.requireAuth`).toBe(true);
      }
    });

    it("the compose stack's configuration requires the initial admin password (no admin/admin)", () => {
      const load = (env: Record<string, string>) => loadConfig({ argv: ['--config', path.join(root, 'deploy/agentry.yaml')], env, cwd: root });
      expect(() => load({})).toThrow('security.users.admin: environment variable AGENTRY_ADMIN_PASSWORD is not set');
      expect(load({ AGENTRY_ADMIN_PASSWORD: 'initial-admin-password' }).config.security.users).toEqual({ admin: 'initial-admin-password' });
    });
  });

  describe('docker-compose.yml', () => {
    it('matches the Compose Specification schema', () => {
      expect(composeSchemaProblems(loadCompose())).toEqual([]);
    });

    it('runs the image the entrypoint knows, in order, health-checked, with only the proxy published', () => {
      expect(composeProblems(loadCompose())).toEqual([]);
    });

    it('takes the secrets from files that deploy/make-secrets.sh makes and git never sees', () => {
      const compose = loadCompose();
      expect(Object.keys(obj(compose.secrets)).sort()).toEqual(['admin_password', 'agentry_secret_key', 'postgres_password']);
      const made = read('deploy/make-secrets.sh');
      for (const name of Object.keys(obj(compose.secrets))) {
        expect(String(at(compose, 'secrets', name, 'file'))).toBe(`./deploy/secrets/${name}`);
        expect(made).toContain(name);
      }
      expect(read('deploy/secrets/.gitignore').split('\n')).toEqual(expect.arrayContaining(['*', '!.gitignore']));
      expect(read('.dockerignore').split('\n')).toContain('deploy/secrets');
      expect(at(compose, 'services', 'postgres', 'environment', 'POSTGRES_PASSWORD_FILE')).toBe('/run/secrets/postgres_password');
    });
  });

  describe('kubernetes', () => {
    it('the base renders and matches the Kubernetes schemas and the rules (references left to the overlays)', () => {
      const { resources } = renderKustomization(path.join(root, 'k8s/base'));
      expect([...schemaProblems(resources, 'base'), ...clusterProblems(resources, 'base', { overlay: false })]).toEqual([]);
      expect(unknownFieldProblems(resources, 'base')).toEqual([]);
    });

    it.each(OVERLAYS)('overlay %s renders and matches the Kubernetes schemas and the rules', (overlay) => {
      const { resources, examplesUsed } = renderOverlay(overlay);
      // secrets.env is never committed; rendering falls back to its committed example.
      expect(examplesUsed.every((f) => f.endsWith('/secrets.env'))).toBe(true);
      const context = `overlay ${overlay}`;
      expect([...schemaProblems(resources, context), ...clusterProblems(resources, context, { overlay: true, imageTag: overlayTag(overlay) })]).toEqual([]);
      expect(unknownFieldProblems(resources, context)).toEqual([]);
    });

    it.each(OVERLAYS)('overlay %s keeps secrets.env out of git and documents every key', (overlay) => {
      const dir = `k8s/overlays/${overlay}`;
      expect(read(`${dir}/.gitignore`).split('\n')).toContain('secrets.env');
      expect(Object.keys(parseEnvFile(read(`${dir}/secrets.env.example`))).sort()).toEqual(['AGENTRY_ADMIN_PASSWORD', 'AGENTRY_METRICS_TOKEN', 'AGENTRY_SECRET_KEY', 'DATABASE_URL', 'REDIS_URL']);
    });

    it('overlays differ where they should: image tag, replicas, resources', () => {
      const dev = renderOverlay('dev').resources;
      const prod = renderOverlay('prod').resources;
      const image = (rs: Resource[]) => String(at(podSpec(findResource(rs, 'Deployment', 'agentry-gateway').doc), 'containers', 0, 'image'));
      expect(image(dev)).toBe('agentry:dev');
      expect(image(prod)).toBe(`registry.example.com/agentry:${overlayTag('prod')}`);
      const minReplicas = (rs: Resource[]) => Number(at(findResource(rs, 'HorizontalPodAutoscaler', 'agentry-gateway').doc, 'spec', 'minReplicas'));
      expect(minReplicas(dev)).toBeLessThan(minReplicas(prod));
    });
  });

  // The checks above pass on the committed files; these prove they fail, naming file and object.
  describe('the rules catch broken files', () => {
    it('a Deployment without a readiness probe, the chat route buffered, a root container', () => {
      const { resources } = renderOverlay('prod');
      const gateway = findResource(resources, 'Deployment', 'agentry-gateway');
      const container = obj(at(podSpec(gateway.doc), 'containers', 0));
      delete container.readinessProbe;
      obj(container.securityContext).runAsNonRoot = false;
      obj(at(podSpec(gateway.doc), 'securityContext')).runAsNonRoot = false;
      const chat = findResource(resources, 'Ingress', 'agentry-chat');
      obj(at(chat.doc, 'metadata', 'annotations'))['nginx.ingress.kubernetes.io/proxy-buffering'] = 'on';
      const problems = clusterProblems(resources, 'overlay prod', { overlay: true, imageTag: overlayTag('prod') });
      expect(problems).toEqual(
        expect.arrayContaining([
          'k8s/base/gateway.yaml (overlay prod): Deployment/agentry-gateway: container "gateway": no readinessProbe',
          'k8s/base/gateway.yaml (overlay prod): Deployment/agentry-gateway: container "gateway": runAsNonRoot is not true',
          'k8s/base/ingress.yaml (overlay prod): Ingress/agentry-chat: /api/v1/chat/completions needs nginx.ingress.kubernetes.io/proxy-buffering: "off" (SSE)',
        ]),
      );
    });

    it('a Deployment Prometheus would not scrape, or would scrape on the wrong port', () => {
      const { resources } = renderOverlay('prod');
      const annotations = (name: string) => obj(at(findResource(resources, 'Deployment', name).doc, 'spec', 'template', 'metadata', 'annotations'));
      delete annotations('agentry-scheduler')['prometheus.io/scrape'];
      annotations('agentry-agent-worker')['prometheus.io/port'] = '9527';
      expect(clusterProblems(resources, 'overlay prod', { overlay: true, imageTag: overlayTag('prod') })).toEqual([
        'k8s/base/agent-worker.yaml (overlay prod): Deployment/agentry-agent-worker: pod annotation prometheus.io/port is "9527", not "9601"',
        'k8s/base/scheduler.yaml (overlay prod): Deployment/agentry-scheduler: pod annotation prometheus.io/scrape is undefined, not "true"',
      ]);
    });

    it('a schema violation and a dangling HPA', () => {
      const { resources } = renderOverlay('dev');
      const worker = findResource(resources, 'Deployment', 'agentry-agent-worker');
      obj(at(podSpec(worker.doc), 'containers', 0, 'ports', 0)).containerPort = 'nine-six-oh-one';
      obj(at(findResource(resources, 'HorizontalPodAutoscaler', 'agentry-gateway').doc, 'spec', 'scaleTargetRef')).name = 'agentry-gateway-old';
      expect(schemaProblems(resources, 'overlay dev')).toEqual([
        expect.stringMatching(/^k8s\/base\/agent-worker\.yaml \(overlay dev\): Deployment\/agentry-agent-worker: does not match the Kubernetes schema: .*containerPort must be integer/),
      ]);
      expect(clusterProblems(resources, 'overlay dev', { overlay: true, imageTag: 'dev' })).toEqual(
        expect.arrayContaining(['k8s/base/gateway.yaml (overlay dev): HorizontalPodAutoscaler/agentry-gateway: scaleTargetRef Deployment/agentry-gateway-old is not a Deployment here']),
      );
    });

    it('a misspelt field the OpenAPI schemas let through', () => {
      const { resources } = renderOverlay('prod');
      const container = obj(at(podSpec(findResource(resources, 'Deployment', 'agentry-scheduler').doc), 'containers', 0));
      container.readinesProbe = container.readinessProbe;
      expect(schemaProblems(resources, 'overlay prod')).toEqual([]);
      expect(unknownFieldProblems(resources, 'overlay prod')).toEqual([
        expect.stringMatching(/^k8s\/base\/scheduler\.yaml \(overlay prod\): Deployment\/agentry-scheduler: .*'"readinesProbe"' does not exist in type 'IContainer'/),
      ]);
    });

    it('a compose service the image does not know, a published worker port, a bad key', () => {
      const compose = loadCompose();
      const services = obj(compose.services);
      obj(services.scheduler).command = ['cron'];
      obj(services['agent-worker']).ports = ['9601:9601'];
      obj(services.redis).restart_policy = 'always';
      obj(services.gateway).tmpfs = ['/tmp'];
      obj(obj(services.scheduler).environment).AGENTRY_SECRET_KEY = 'in-the-environment-0123456789abcdef';
      delete obj(services.proxy).cap_drop;
      expect(composeProblems(compose)).toEqual(
        expect.arrayContaining([
          'docker-compose.yml: service scheduler: command ["cron"] is not a service of deploy/entrypoint.sh',
          'docker-compose.yml: service agent-worker publishes ports; only the gateway\'s proxy may',
          'docker-compose.yml: no service runs "scheduler" (deploy/entrypoint.sh)',
          'docker-compose.yml: service gateway: needs a tmpfs /tmp with exec and a size',
          'docker-compose.yml: service scheduler: AGENTRY_SECRET_KEY in the environment (docker inspect shows it); use AGENTRY_SECRET_KEY_FILE and a compose secret',
          'docker-compose.yml: service proxy: needs cap_drop: [ALL]',
        ]),
      );
      expect(composeSchemaProblems(compose).join('\n')).toMatch(/\/services\/redis must NOT have additional properties .*restart_policy/);
    });

    it('a renderer that meets a kustomize feature it does not know says so', () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-kustomize-'));
      try {
        fs.writeFileSync(path.join(dir, 'kustomization.yaml'), 'resources: []\nnamePrefix: x-\n');
        expect(() => renderKustomization(dir)).toThrow(/"namePrefix" is not supported by the test's kustomize renderer/);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});
