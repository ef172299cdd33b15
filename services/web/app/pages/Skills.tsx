import { useState, type DragEvent, type FormEvent, type ReactNode } from 'react';
import { ApiError, api, fetchAll, qs } from '../lib/api';
import { filterItems } from '../lib/lists';
import { adminOnlyReason, notOwnerReason } from '../lib/permissions';
import { useAction, useLoad } from '../lib/hooks';
import type { AgentListItem, Skill, SkillUploadResult } from '@agentry/client';
import { Markdown } from '../components/Markdown';
import { ErrorText, Loading, Notice, PageHeader, Progress, SearchField, SelectField, TextArea, TextField, fmtTime, idProblem } from '../components/ui';
import { useApp } from '../context';

type Scope = { kind: 'global' } | { kind: 'local'; agentId: string };

/** Every skill of the scope, all pages. */
const listAll = (s: Scope) => (s.kind === 'global' ? fetchAll<Skill>('/skills', { scope: 'global' }) : fetchAll<Skill>(`/agents/${encodeURIComponent(s.agentId)}/skills`));
const skillPath = (s: Scope, name: string) =>
  s.kind === 'global' ? `/skills/${encodeURIComponent(name)}${qs({ scope: 'global' })}` : `/agents/${encodeURIComponent(s.agentId)}/skills/${encodeURIComponent(name)}`;

/** Uploads a zip of skills into the scope and sums up what the server made of it. */
function useSkillUpload(scope: Scope, action: ReturnType<typeof useAction>, reload: () => void) {
  const [uploadResult, setUploadResult] = useState<string | null>(null);
  const [uploading, setUploading] = useState<{ name: string; since: number } | null>(null);
  const upload = async (files: FileList | null) => {
    const file = files?.[0];
    if (!file) return;
    setUploadResult(null);
    setUploading({ name: file.name, since: Date.now() });
    const form = new FormData();
    form.append('scope', scope.kind);
    if (scope.kind === 'local') form.append('agentId', scope.agentId);
    form.append('file', file);
    const answer = await action.run(() => api.post<SkillUploadResult>('/skills/upload', form)).finally(() => setUploading(null));
    if (answer) {
      reload();
      setUploadResult(describeUpload(answer));
    }
  };

  return { upload, uploadResult, uploading };
}

export function SkillsPage() {
  const { notify } = useApp();
  const agents = useLoad(async () => ({ data: await fetchAll<AgentListItem>('/agents') }), []);
  const [scopeValue, setScopeValue] = useState('global');
  const scope: Scope = scopeValue === 'global' ? { kind: 'global' } : { kind: 'local', agentId: scopeValue };
  const skills = useLoad(async () => ({ data: await listAll(scope) }), [scopeValue]);
  const [editing, setEditing] = useState<string | 'new' | null>(null);
  const [copying, setCopying] = useState<string | null>(null);
  const action = useAction();
  const { upload, uploadResult, uploading } = useSkillUpload(scope, action, skills.reload);

  const remove = async (name: string) => {
    if (!window.confirm(`Delete skill "${name}"?`)) return;
    if (await action.run(() => api.delete(skillPath(scope, name)))) {
      skills.reload();
      notify(`Skill ${name} deleted`);
    }
  };
  const saved = (name: string, verb: 'created' | 'saved') => {
    setEditing(null);
    skills.reload();
    notify(`Skill ${name} ${verb}`);
  };
  const copied = (msg: string) => (setCopying(null), notify(msg));
  const { status } = useApp();
  const owner = agents.data?.data.find((a) => a.ruleChain.id === scopeValue)?.ruleChain.owner;
  const why = scope.kind === 'global' ? adminOnlyReason(status, 'global skills') : notOwnerReason(status, owner, "agent's skills");

  return (
    <div className="page">
      <SkillsHeader
        scopeValue={scopeValue}
        agents={agents.data?.data ?? []}
        why={why}
        newOpen={editing === 'new'}
        onScope={(v) => (setScopeValue(v), setEditing(null), setCopying(null))}
        onUpload={upload}
        onNew={() => setEditing(editing === 'new' ? null : 'new')}
      />
      <p className="muted">Skills are Markdown instructions the agent can load by name. An agent's own skills override global ones of the same name.</p>
      {why ? <Notice>{why}</Notice> : <ZipDropZone onFiles={upload} />}
      {uploading ? <Progress label={`Uploading ${uploading.name}`} since={uploading.since} /> : null}
      {uploadResult ? <Notice kind="ok">Upload: {uploadResult}.</Notice> : null}
      <ErrorText error={skills.error ?? action.error} />
      {editing === 'new' ? (
        <SkillEditor scope={scope} onDone={(s) => saved(s.name, 'created')} onCancel={() => setEditing(null)} />
      ) : null}
      {!skills.data ? (
        <Loading />
      ) : skills.data.data.length === 0 ? (
        <p className="muted">No skills here yet.</p>
      ) : (
        <SkillList skills={skills.data.data}>
          {(s) => (
            <SkillItem
              key={s.name}
              skill={s}
              scope={scope}
              agents={agents.data?.data ?? []}
              editing={editing === s.name}
              copying={copying === s.name}
              onEdit={(open) => setEditing(open ? s.name : null)}
              onCopy={(open) => setCopying(open ? s.name : null)}
              onDelete={() => void remove(s.name)}
              onSaved={() => saved(s.name, 'saved')}
              onCopied={copied}
              why={why}
              copyWhy={adminOnlyReason(status, 'where skills are copied')}
            />
          )}
        </SkillList>
      )}
    </div>
  );
}

/** Scope, Upload zip and New skill; both writes disabled, with the reason, where the viewer may not act. */
function SkillsHeader(props: {
  scopeValue: string;
  agents: AgentListItem[];
  why: string | null;
  newOpen: boolean;
  onScope: (v: string) => void;
  onUpload: (files: FileList | null) => Promise<void>;
  onNew: () => void;
}) {
  const { why } = props;
  return (
    <PageHeader title="Skills">
      <ScopePicker value={props.scopeValue} agents={props.agents} onValue={props.onScope} />
      <label className={`button secondary file-button${why ? ' disabled' : ''}`} title={why ?? undefined}>
        Upload zip
        <input type="file" accept=".zip,application/zip" className="sr-only" disabled={why !== null} onChange={(e) => void props.onUpload(e.target.files).finally(() => (e.target.value = ''))} />
      </label>
      <button type="button" onClick={props.onNew} aria-expanded={props.newOpen} disabled={why !== null} title={why ?? undefined}>
        New skill
      </button>
    </PageHeader>
  );
}

/**
 * Where a zip of skills can be dropped (as "Upload zip" takes one): it lights up while a file is
 * dragged over it; anything but a .zip is refused here with a sentence, before any upload.
 */
function ZipDropZone({ onFiles }: { onFiles: (files: FileList | null) => Promise<void> }) {
  const [over, setOver] = useState(false);
  const [refused, setRefused] = useState<string | null>(null);
  const drop = (e: DragEvent<HTMLDivElement>) => {
    e.preventDefault();
    setOver(false);
    const file = e.dataTransfer.files[0];
    if (!file) return;
    if (!/\.zip$/i.test(file.name) && file.type !== 'application/zip') {
      setRefused(`${file.name} is not a .zip: drop a zip of <name>/SKILL.md (or <name>.md) files`);
      return;
    }
    setRefused(null);
    void onFiles(e.dataTransfer.files);
  };
  return (
    <div
      className={`drop-zone${over ? ' over' : ''}`}
      role="region"
      aria-label="Drop a zip of skills"
      onDragOver={(e) => (e.preventDefault(), setOver(true))}
      onDragLeave={() => setOver(false)}
      onDrop={drop}
    >
      Drop a <strong>.zip</strong> of skills here to upload it (each <code>&lt;name&gt;/SKILL.md</code> or <code>&lt;name&gt;.md</code> becomes a skill)
      {refused ? <ErrorText error={refused} /> : null}
    </div>
  );
}

/** A skill's content, read only (for a viewer who may not edit it). */
function SkillView({ scope, name }: { scope: Scope; name: string }) {
  const skill = useLoad(() => api.get<Skill>(skillPath(scope, name)), [name]);
  if (skill.error) return <ErrorText error={skill.error} />;
  if (!skill.data) return <Loading />;
  return (
    <div className="skill-view">
      <Markdown text={skill.data.content || '*This skill has no content.*'} />
    </div>
  );
}

/** The skills, with a search box once there are more than a few. */
function SkillList({ skills, children }: { skills: Skill[]; children: (s: Skill) => ReactNode }) {
  const [search, setSearch] = useState('');
  return (
    <>
      {skills.length > 5 ? <SearchField label="Search skills" value={search} onValue={setSearch} /> : null}
      <ul className="skill-list">{filterItems(skills, search, (s) => [s.name, s.description]).map(children)}</ul>
    </>
  );
}

function describeUpload(answer: SkillUploadResult): string {
  return (
    [
      answer.created.length ? `created ${answer.created.join(', ')}` : '',
      answer.updated.length ? `updated ${answer.updated.join(', ')}` : '',
      answer.skipped.length ? `skipped ${answer.skipped.map((s) => `${s.entry} (${s.reason})`).join(', ')}` : '',
    ]
      .filter(Boolean)
      .join('; ') || 'the archive held no skills'
  );
}

function ScopePicker({ value, agents, onValue }: { value: string; agents: AgentListItem[]; onValue: (v: string) => void }) {
  return (
    <label className="inline-field">
      <span>Scope</span>
      <select value={value} onChange={(e) => onValue(e.target.value)}>
        <option value="global">Global (every agent)</option>
        {agents.map((a) => (
          <option key={a.ruleChain.id} value={a.ruleChain.id}>
            Agent {a.ruleChain.name || a.ruleChain.id}
          </option>
        ))}
      </select>
    </label>
  );
}

/** One skill: its card, and the copy form or the editor when open. */
function SkillItem({
  skill: s,
  scope,
  agents,
  editing,
  copying,
  onEdit,
  onCopy,
  onDelete,
  onSaved,
  onCopied,
  why,
  copyWhy,
}: {
  why: string | null;
  copyWhy: string | null;
  skill: Skill;
  scope: Scope;
  agents: AgentListItem[];
  editing: boolean;
  copying: boolean;
  onEdit: (open: boolean) => void;
  onCopy: (open: boolean) => void;
  onDelete: () => void;
  onSaved: () => void;
  onCopied: (msg: string) => void;
}) {
  const [viewing, setViewing] = useState(false);
  return (
    <li className="card">
      <div className="card-header">
        <h2>
          {/* The name opens the skill: its editor for whoever may change it, else its content to read. */}
          <button
            type="button"
            className="link-button skill-name"
            onClick={() => (why === null ? onEdit(!editing) : setViewing(!viewing))}
            aria-expanded={why === null ? editing : viewing}
            title={why === null ? 'Edit this skill' : 'Show this skill'}
          >
            {s.name}
          </button>{' '}
          {s.status === 'draft' ? <span className="badge warn">draft</span> : null}
        </h2>
        <div className="row-actions">
          <button type="button" className="link-button" onClick={() => onEdit(!editing)} aria-expanded={editing} disabled={why !== null} title={why ?? undefined}>
            Edit
          </button>
          <button type="button" className="link-button" onClick={() => onCopy(!copying)} aria-expanded={copying} disabled={copyWhy !== null} title={copyWhy ?? undefined}>
            Copy to…
          </button>
          <button type="button" className="link-button danger-text" onClick={onDelete} disabled={why !== null} title={why ?? undefined}>
            Delete
          </button>
        </div>
      </div>
      <p>{s.description || <span className="muted">No description.</span>}</p>
      <p className="hint">Updated {fmtTime(s.updatedAt)}</p>
      {copying ? (
        <CopyForm skill={s} scope={scope} agents={agents} onDone={onCopied} />
      ) : null}
      {editing ? (
        <SkillEditor scope={scope} name={s.name} onDone={onSaved} onCancel={() => onEdit(false)} />
      ) : null}
      {viewing && !editing ? <SkillView scope={scope} name={s.name} /> : null}
    </li>
  );
}

function SkillEditor({ scope, name, onDone, onCancel }: { scope: Scope; name?: string; onDone: (s: Skill) => void; onCancel: () => void }) {
  const existing = useLoad(() => (name ? api.get<Skill>(skillPath(scope, name)) : Promise.resolve(undefined)), [name]);
  const [newName, setNewName] = useState('');
  const [description, setDescription] = useState<string | null>(null);
  const [content, setContent] = useState<string | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  const [nameError, setNameError] = useState<string | null>(null);
  const action = useAction();
  const d = description ?? existing.data?.description ?? '';
  const c = content ?? existing.data?.content ?? '';
  const st = status ?? existing.data?.status ?? 'active';

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (!name) {
      const problem = idProblem(newName, 'Name');
      setNameError(problem);
      if (problem) return;
    }
    const saved = await action.run(async () => {
      if (name) return api.put<Skill>(name && scope.kind === 'global' ? `/skills/${encodeURIComponent(name)}` : skillPath(scope, name), { description: d, content: c, status: st, ...(scope.kind === 'global' ? { scope: 'global' } : {}) });
      try {
        return scope.kind === 'global'
          ? await api.post<Skill>('/skills', { name: newName, description: d, content: c, status: st, scope: 'global' })
          : await api.post<Skill>(`/agents/${encodeURIComponent(scope.agentId)}/skills`, { name: newName, description: d, content: c, status: st });
      } catch (err) {
        if (err instanceof ApiError && err.status === 409) setNameError(err.message);
        throw err;
      }
    });
    if (saved) onDone(saved);
  };

  if (name && !existing.data) return existing.error ? <ErrorText error={existing.error} /> : <Loading />;
  return (
    <form className="form skill-editor" onSubmit={(e) => void submit(e)} aria-label={name ? `Edit skill ${name}` : 'New skill'}>
      <div className="grid-2">
        {!name ? <TextField label="Name" value={newName} onValue={setNewName} error={nameError} required autoFocus /> : null}
        <TextField label="Description" value={d} onValue={setDescription} hint="One line the agent sees in its list of skills." />
        <SelectField
          label="Status"
          value={st}
          onValue={setStatus}
          options={[
            { value: 'active', label: 'active' },
            { value: 'draft', label: 'draft (not offered to agents)' },
          ]}
        />
      </div>
      <div className="editor-preview">
        <TextArea label="Content (Markdown)" value={c} onValue={setContent} rows={16} spellCheck={false} />
        <div className="preview" aria-label="Preview">
          <div className="preview-label">Preview</div>
          <Markdown text={c || '*Nothing yet.*'} />
        </div>
      </div>
      <ErrorText error={nameError ? null : action.error} />
      <div className="form-actions">
        <button type="submit" disabled={action.busy}>
          {action.busy ? 'Saving…' : name ? 'Save skill' : 'Create skill'}
        </button>
        <button type="button" className="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/** Global -> an agent's own skills, or an agent's -> global (POST /skills/copy). */
function CopyForm({ skill, scope, agents, onDone }: { skill: Skill; scope: Scope; agents: AgentListItem[]; onDone: (msg: string) => void }) {
  const [agentId, setAgentId] = useState(scope.kind === 'local' ? scope.agentId : (agents[0]?.ruleChain.id ?? ''));
  const [newName, setNewName] = useState('');
  const action = useAction();
  const toLocal = scope.kind === 'global';

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const done = await action.run(() =>
      api.post<Skill>('/skills/copy', { name: skill.name, targetScope: toLocal ? 'local' : 'global', agentId, ...(newName ? { newName } : {}) }),
    );
    if (done) onDone(`Copied ${skill.name} to ${toLocal ? `agent ${agentId}` : 'the global skills'}${newName ? ` as ${newName}` : ''}`);
  };

  return (
    <form className="form inline-form" onSubmit={(e) => void submit(e)} aria-label={`Copy skill ${skill.name}`}>
      <div className="grid-2">
        {toLocal ? (
          <SelectField label="To agent" value={agentId} onValue={setAgentId} options={agents.map((a) => ({ value: a.ruleChain.id, label: a.ruleChain.name || a.ruleChain.id }))} />
        ) : (
          <p>To the global skills (every agent).</p>
        )}
        <TextField label="New name (optional)" value={newName} onValue={setNewName} placeholder={skill.name} />
      </div>
      <ErrorText error={action.error} />
      <div className="form-actions">
        <button type="submit" disabled={action.busy || !agentId}>
          Copy
        </button>
      </div>
    </form>
  );
}
