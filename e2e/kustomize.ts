/**
 * A small kustomize and untyped-YAML helpers, shared by the tests that render k8s/: the schema
 * and rule checks (deploy-manifests.test.ts) and the containers run from the rendered specs
 * (image.test.ts). Not a test file: importing a test file would run its tests twice.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml, parseAllDocuments } from 'yaml';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const rel = (file: string): string => path.relative(root, file).split(path.sep).join('/');

// ---------------------------------------------------------------------------------------------
// Untyped YAML, read safely.

export type Obj = Record<string, unknown>;
export const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
export const obj = (v: unknown): Obj => (isObj(v) ? v : {});
export const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
export const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
export function at(v: unknown, ...keys: Array<string | number>): unknown {
  let node = v;
  for (const key of keys) {
    if (typeof key === 'number') node = Array.isArray(node) ? node[key] : undefined;
    else node = isObj(node) ? node[key] : undefined;
  }
  return node;
}


// ---------------------------------------------------------------------------------------------
// A small kustomize: resources (files and directories), configMapGenerator / secretGenerator
// (files, envs; name hash suffix with references renamed), patches (strategic merge by kind and
// name, or JSON 6902 ops with a target), namespace, images. Nothing else.

export interface Resource {
  doc: Obj;
  /** The file the object came from, relative to the repository. */
  source: string;
}

const KUSTOMIZATION_KEYS = new Set(['apiVersion', 'kind', 'resources', 'namespace', 'images', 'configMapGenerator', 'secretGenerator', 'patches']);
const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'PersistentVolume', 'StorageClass', 'IngressClass', 'PriorityClass']);
/** Strategic-merge keys of the lists the manifests patch (from the Kubernetes API's patchMergeKey). */
const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  env: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
  imagePullSecrets: 'name',
};

export const kindName = (doc: Obj): string => `${str(doc.kind)}/${str(at(doc, 'metadata', 'name'))}`;

function loadDocs(file: string): Resource[] {
  return parseAllDocuments(fs.readFileSync(file, 'utf8'))
    .map((d) => {
      if (d.errors.length > 0) throw new Error(`${rel(file)}: bad YAML: ${d.errors[0]!.message}`);
      return d.toJS() as unknown;
    })
    .filter(isObj)
    .map((doc) => ({ doc, source: rel(file) }));
}

function strategicMerge(target: unknown, patch: unknown, key = ''): unknown {
  if (Array.isArray(patch)) {
    const mergeKey = MERGE_KEYS[key];
    if (!mergeKey || !Array.isArray(target)) return structuredClone(patch);
    const out = structuredClone(target) as unknown[];
    for (const item of patch) {
      const i = out.findIndex((t) => isObj(t) && isObj(item) && t[mergeKey] === item[mergeKey]);
      if (i >= 0) out[i] = strategicMerge(out[i], item);
      else out.push(structuredClone(item));
    }
    return out;
  }
  if (isObj(patch)) {
    const out: Obj = isObj(target) ? structuredClone(target) : {};
    for (const [k, v] of Object.entries(patch)) {
      if (v === null) delete out[k];
      else out[k] = strategicMerge(out[k], v, k);
    }
    return out;
  }
  return patch;
}

function jsonPatch(doc: Obj, ops: unknown[], where: string): void {
  for (const raw of ops) {
    const op = obj(raw);
    const parts = (str(op.path) ?? '').split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = parts.pop();
    const parent = at(doc, ...parts.map((p) => (/^\d+$/.test(p) ? Number(p) : p)));
    if (last === undefined || (!isObj(parent) && !Array.isArray(parent))) throw new Error(`${where}: JSON patch path ${String(op.path)} does not exist`);
    const container = parent as Record<string, unknown>;
    if (op.op === 'replace' || op.op === 'add') {
      if (op.op === 'replace' && !(last in container)) throw new Error(`${where}: JSON patch replaces ${String(op.path)}, which does not exist`);
      container[last] = structuredClone(op.value);
    } else if (op.op === 'remove') delete container[last];
    else throw new Error(`${where}: JSON patch op "${String(op.op)}" is not supported by this renderer`);
  }
}

/** The pod spec of a workload, or undefined for other kinds. */
export function podSpec(doc: Obj): Obj | undefined {
  const kind = doc.kind;
  if (kind === 'Deployment' || kind === 'Job' || kind === 'StatefulSet' || kind === 'DaemonSet') {
    const spec = at(doc, 'spec', 'template', 'spec');
    return isObj(spec) ? spec : undefined;
  }
  if (kind === 'CronJob') {
    const spec = at(doc, 'spec', 'jobTemplate', 'spec', 'template', 'spec');
    return isObj(spec) ? spec : undefined;
  }
  return undefined;
}
export const containersOf = (spec: Obj): Obj[] => [...arr(spec.initContainers), ...arr(spec.containers)].filter(isObj);

/** Every ConfigMap / Secret name a pod spec refers to, as mutable slots. */
export function references(spec: Obj): Array<{ kind: 'ConfigMap' | 'Secret'; holder: Obj; key: string; dataKey?: string }> {
  const refs: Array<{ kind: 'ConfigMap' | 'Secret'; holder: Obj; key: string; dataKey?: string }> = [];
  for (const v of arr(spec.volumes).filter(isObj)) {
    if (isObj(v.configMap)) refs.push({ kind: 'ConfigMap', holder: v.configMap, key: 'name' });
    if (isObj(v.secret)) refs.push({ kind: 'Secret', holder: v.secret, key: 'secretName' });
  }
  for (const c of containersOf(spec)) {
    for (const e of arr(c.envFrom).filter(isObj)) {
      if (isObj(e.configMapRef)) refs.push({ kind: 'ConfigMap', holder: e.configMapRef, key: 'name' });
      if (isObj(e.secretRef)) refs.push({ kind: 'Secret', holder: e.secretRef, key: 'name' });
    }
    for (const e of arr(c.env).filter(isObj)) {
      const cm = at(e, 'valueFrom', 'configMapKeyRef');
      const sec = at(e, 'valueFrom', 'secretKeyRef');
      if (isObj(cm)) refs.push({ kind: 'ConfigMap', holder: cm, key: 'name', dataKey: str(cm.key) });
      if (isObj(sec)) refs.push({ kind: 'Secret', holder: sec, key: 'name', dataKey: str(sec.key) });
    }
  }
  return refs;
}

export function splitImage(image: string): { name: string; tag?: string; digest?: string } {
  const [rest, digest] = image.split('@') as [string, string | undefined];
  const colon = rest.lastIndexOf(':');
  const name = colon > rest.lastIndexOf('/') ? rest.slice(0, colon) : rest;
  const tag = colon > rest.lastIndexOf('/') ? rest.slice(colon + 1) : undefined;
  return { name, tag, digest };
}

export function parseEnvFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const t = line.trim();
    if (t === '' || t.startsWith('#')) continue;
    const eq = t.indexOf('=');
    if (eq <= 0) throw new Error(`env file line without KEY=VALUE: ${t}`);
    out[t.slice(0, eq)] = t.slice(eq + 1);
  }
  return out;
}

/** Kustomize's suffix is a hash of the generated object; this one is too (not byte-identical). */
const contentHash = (doc: Obj): string => createHash('sha256').update(JSON.stringify(doc)).digest('hex').slice(0, 10);

export interface Rendered {
  resources: Resource[];
  /** Env files that were missing, so their committed `.example` was used instead. */
  examplesUsed: string[];
}

export function renderKustomization(dir: string, examplesUsed: string[] = []): Rendered {
  const file = path.join(dir, 'kustomization.yaml');
  const where = rel(file);
  const k = obj(parseYaml(fs.readFileSync(file, 'utf8')));
  for (const key of Object.keys(k)) {
    if (!KUSTOMIZATION_KEYS.has(key)) throw new Error(`${where}: "${key}" is not supported by the test's kustomize renderer (e2e/kustomize.ts); teach it first`);
  }
  const resources: Resource[] = [];
  for (const entry of arr(k.resources)) {
    const p = path.resolve(dir, String(entry));
    if (!fs.existsSync(p)) throw new Error(`${where}: resource ${String(entry)} does not exist`);
    if (fs.statSync(p).isDirectory()) resources.push(...renderKustomization(p, examplesUsed).resources);
    else resources.push(...loadDocs(p));
  }

  const generated: Resource[] = [];
  for (const [field, kind] of [
    ['configMapGenerator', 'ConfigMap'],
    ['secretGenerator', 'Secret'],
  ] as const) {
    for (const g of arr(k[field]).filter(isObj)) {
      const data: Record<string, string> = {};
      for (const f of arr(g.files).map(String)) {
        const [key, src] = f.includes('=') ? (f.split('=', 2) as [string, string]) : [path.basename(f), f];
        data[key] = fs.readFileSync(path.resolve(dir, src), 'utf8');
      }
      for (const e of arr(g.envs).map(String)) {
        let envFile = path.resolve(dir, e);
        if (!fs.existsSync(envFile) && fs.existsSync(`${envFile}.example`)) {
          examplesUsed.push(rel(envFile));
          envFile = `${envFile}.example`;
        }
        Object.assign(data, parseEnvFile(fs.readFileSync(envFile, 'utf8')));
      }
      const doc: Obj = { apiVersion: 'v1', kind, metadata: { name: str(g.name) } };
      if (kind === 'Secret') {
        doc.type = 'Opaque';
        doc.data = Object.fromEntries(Object.entries(data).map(([key, v]) => [key, Buffer.from(v).toString('base64')]));
      } else doc.data = data;
      generated.push({ doc, source: where });
    }
  }
  resources.push(...generated);

  for (const p of arr(k.patches).filter(isObj)) {
    const target = obj(p.target);
    const patchText = p.path !== undefined ? fs.readFileSync(path.resolve(dir, String(p.path)), 'utf8') : String(p.patch ?? '');
    const patchWhere = p.path !== undefined ? rel(path.resolve(dir, String(p.path))) : `${where} (inline patch)`;
    const docs = parseAllDocuments(patchText).map((d) => d.toJS() as unknown);
    if (docs.length !== 1) throw new Error(`${patchWhere}: one patch per file (kustomize reads a single document)`);
    const patch = docs[0];
    if (Array.isArray(patch)) {
      const matches = resources.filter((r) => r.doc.kind === target.kind && at(r.doc, 'metadata', 'name') === target.name);
      if (matches.length === 0) throw new Error(`${patchWhere}: no ${String(target.kind)}/${String(target.name)} to patch`);
      for (const r of matches) jsonPatch(r.doc, patch, patchWhere);
    } else if (isObj(patch)) {
      const matches = resources.filter((r) => r.doc.kind === patch.kind && at(r.doc, 'metadata', 'name') === at(patch, 'metadata', 'name'));
      if (matches.length !== 1) throw new Error(`${patchWhere}: patches ${kindName(patch)}, which matches ${matches.length} objects`);
      matches[0]!.doc = strategicMerge(matches[0]!.doc, patch) as Obj;
    } else throw new Error(`${patchWhere}: neither a strategic-merge nor a JSON patch`);
  }

  const namespace = str(k.namespace);
  if (namespace) {
    for (const r of resources) if (!CLUSTER_SCOPED.has(String(r.doc.kind))) obj(r.doc.metadata).namespace = namespace;
  }

  for (const img of arr(k.images).filter(isObj)) {
    for (const r of resources) {
      const spec = podSpec(r.doc);
      if (!spec) continue;
      for (const c of containersOf(spec)) {
        const current = splitImage(String(c.image ?? ''));
        if (current.name !== img.name) continue;
        const name = str(img.newName) ?? current.name;
        const tag = img.newTag !== undefined ? String(img.newTag) : current.tag;
        c.image = `${name}${tag ? `:${tag}` : ''}${current.digest ? `@${current.digest}` : ''}`;
      }
    }
  }

  // Generated names get the content hash; every reference follows (base objects included).
  for (const g of generated) {
    const meta = obj(g.doc.metadata);
    const before = String(meta.name);
    const after = `${before}-${contentHash(g.doc)}`;
    meta.name = after;
    for (const r of resources) {
      const spec = podSpec(r.doc);
      if (!spec) continue;
      for (const ref of references(spec)) if (ref.kind === g.doc.kind && ref.holder[ref.key] === before) ref.holder[ref.key] = after;
    }
  }

  const seen = new Set<string>();
  for (const r of resources) {
    const id = `${String(r.doc.apiVersion)} ${kindName(r.doc)} ${String(at(r.doc, 'metadata', 'namespace') ?? '')}`;
    if (seen.has(id)) throw new Error(`${where}: ${kindName(r.doc)} is defined twice (${r.source})`);
    seen.add(id);
  }
  return { resources, examplesUsed };
}

