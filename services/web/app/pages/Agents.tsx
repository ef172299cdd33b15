import { useEffect, useMemo, useState, type FormEvent } from 'react';
import { ApiError, api, messageOf } from '../lib/api';
import { useAction, useLoad } from '../lib/hooks';
import { Link, navigate } from '../lib/router';
import type { AgentListItem, AgentTemplate, Paged, Provider, RuleChainDsl, ToolForms } from '../lib/types';
import { ErrorText, Loading, Notice, PageHeader, SelectField, Tabs, TextArea, TextField, idProblem } from '../components/ui';
import { useApp } from '../context';

export function AgentsPage() {
  const agents = useLoad(() => api.get<Paged<AgentListItem>>('/agents?size=100'), []);
  return (
    <div className="page">
      <PageHeader title="Agents">
        <Link to="/agents/new" className="button">
          New agent
        </Link>
      </PageHeader>
      <ErrorText error={agents.error} />
      {!agents.data ? (
        <Loading />
      ) : agents.data.data.length === 0 ? (
        <p>
          No agents yet. <Link to="/agents/new">Create one from the template</Link>.
        </p>
      ) : (
        <div className="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Id (the chat model)</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {agents.data.data.map((a) => (
                <tr key={a.ruleChain.id}>
                  <td>
                    <Link to={`/agents/${encodeURIComponent(a.ruleChain.id)}`}>{a.ruleChain.name || a.ruleChain.id}</Link>
                  </td>
                  <td>
                    <code>{a.ruleChain.id}</code>
                  </td>
                  <td className="row-actions">
                    <Link to={`/chat/${encodeURIComponent(a.ruleChain.id)}`}>Chat</Link>
                    <Link to={`/workspace/${encodeURIComponent(a.ruleChain.id)}`}>Workspace</Link>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {agents.data.total > agents.data.data.length ? <p className="muted">Showing the first {agents.data.data.length} of {agents.data.total}.</p> : null}
        </div>
      )}
    </div>
  );
}

/** A new agent: the gateway's template (GET /agent-template) with an id, a name and a description. */
export function AgentNewPage() {
  const { notify } = useApp();
  const [id, setId] = useState('');
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [idError, setIdError] = useState<string | null>(null);
  const action = useAction();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const problem = idProblem(id, 'Id');
    setIdError(problem);
    if (problem) return;
    const created = await action.run(async () => {
      const { workspaceFiles: _files, ...template } = await api.get<AgentTemplate>('/agent-template');
      const dsl: RuleChainDsl = {
        ...template,
        ruleChain: {
          ...template.ruleChain,
          id,
          name: name || id,
          additionalInfo: { ...template.ruleChain.additionalInfo, ...(description ? { description } : {}) },
        },
      };
      try {
        return await api.post<RuleChainDsl>('/agents', dsl);
      } catch (err) {
        if (err instanceof ApiError && err.status === 409) setIdError(`an agent "${id}" already exists`);
        throw err;
      }
    });
    if (created) {
      notify(`Agent ${id} created`);
      navigate(`/agents/${encodeURIComponent(id)}`);
    }
  };

  return (
    <div className="page narrow">
      <PageHeader title="New agent" />
      <p className="muted">
        The agent starts from the template: the default model provider, the built-in tools that are not opt-in, and a workspace with <code>AGENTS.md</code>.
      </p>
      <form onSubmit={(e) => void submit(e)} className="form">
        <TextField label="Id" value={id} onValue={setId} error={idError} hint="Letters, digits, _ and -. Clients use it as the model name." required autoFocus />
        <TextField label="Name" value={name} onValue={setName} placeholder={id || 'My agent'} />
        <TextArea label="Description" value={description} onValue={setDescription} rows={2} />
        <ErrorText error={idError ? null : action.error} />
        <div className="form-actions">
          <button type="submit" disabled={action.busy}>
            {action.busy ? 'Creating…' : 'Create agent'}
          </button>
          <Link to="/agents" className="button secondary">
            Cancel
          </Link>
        </div>
      </form>
    </div>
  );
}

type AgentConfig = Record<string, unknown> & { tools?: Array<Record<string, unknown>>; params?: Record<string, unknown> };

/** The agent node's configuration fields the form edits, with the DSL path problems map to. */
const FORM_FIELDS = ['provider', 'model', 'systemPrompt', 'tools', 'maxStep', 'maxToolOutputLength', 'params'] as const;

/** Field errors from a 400's message: `metadata.nodes[0] ("a"), ai/agent: configuration.maxStep: must be >= 1; ...`. */
export function fieldErrorsOf(message: string, agentNodeId: string | undefined): { fields: Record<string, string>; other: string[] } {
  const fields: Record<string, string> = {};
  const other: string[] = [];
  for (const problem of message.split('; ')) {
    const inNode = agentNodeId !== undefined && problem.includes(`("${agentNodeId}")`);
    const m = /configuration\.([A-Za-z]+)[^:]*:\s*(.*)$/.exec(problem);
    const key = m?.[1];
    if (inNode && key && (FORM_FIELDS as readonly string[]).includes(key)) fields[key] = fields[key] ? `${fields[key]}; ${m[2]}` : m[2]!;
    else if (/^ruleChain\.name/.test(problem)) fields.name = problem.replace(/^ruleChain\.name:\s*/, '');
    else other.push(problem);
  }
  return { fields, other };
}

/** The first sentence of a tool's description (the whole one is the label's title). */
function firstSentence(text: string): string {
  const m = /^.*?[.!?](?=\s|$)/s.exec(text.trim());
  return (m ? m[0] : text).replace(/\s+/g, ' ');
}

function numberOrText(v: string): number | string | undefined {
  if (v.trim() === '') return undefined;
  return /^-?\d+(\.\d+)?$/.test(v.trim()) ? Number(v) : v;
}

function intProblem(v: unknown): string | null {
  if (v === undefined) return null;
  return typeof v === 'number' && Number.isInteger(v) && v >= 1 ? null : 'a whole number, at least 1';
}

export function AgentEditPage({ agentId }: { agentId: string }) {
  const { notify } = useApp();
  const loaded = useLoad(
    () =>
      Promise.all([
        api.get<RuleChainDsl>(`/agents/${encodeURIComponent(agentId)}`),
        api.get<ToolForms>('/tools/forms'),
        api.get<{ default_provider: string; providers: Provider[] }>('/config/models'),
      ]),
    [agentId],
  );
  const [draft, setDraft] = useState<RuleChainDsl | null>(null);
  const [tab, setTab] = useState<'settings' | 'json'>('settings');
  const [jsonText, setJsonText] = useState('');
  const [jsonError, setJsonError] = useState<string | null>(null);
  const [errors, setErrors] = useState<{ fields: Record<string, string>; other: string[] }>({ fields: {}, other: [] });
  const [dirty, setDirty] = useState(false);
  const action = useAction();

  useEffect(() => {
    if (loaded.data) setDraft(loaded.data[0]);
  }, [loaded.data]);

  const nodeIndex = draft ? draft.metadata.nodes.findIndex((n) => n.type === 'ai/agent') : -1;
  const node = draft && nodeIndex >= 0 ? draft.metadata.nodes[nodeIndex] : undefined;
  const config = (node?.configuration ?? {}) as AgentConfig;

  const change = (next: RuleChainDsl) => {
    setDraft(next);
    setDirty(true);
  };
  const setConfig = (key: string, value: unknown) => {
    if (!draft || nodeIndex < 0) return;
    const nodes = draft.metadata.nodes.map((n, i) => {
      if (i !== nodeIndex) return n;
      const c: Record<string, unknown> = { ...(n.configuration ?? {}) };
      if (value === undefined) delete c[key];
      else c[key] = value;
      return { ...n, configuration: c };
    });
    change({ ...draft, metadata: { ...draft.metadata, nodes } });
    setErrors((e) => ({ ...e, fields: { ...e.fields, [key]: '' } }));
  };
  const setParam = (key: string, value: unknown) => {
    const params: Record<string, unknown> = { ...(config.params ?? {}) };
    if (value === undefined) delete params[key];
    else params[key] = value;
    setConfig('params', Object.keys(params).length ? params : undefined);
  };

  const providers = loaded.data?.[2];
  const forms = loaded.data?.[1];
  const provider = typeof config.provider === 'string' ? config.provider : '';
  const providerView = providers?.providers.find((p) => p.id === (provider || providers.default_provider));
  const tools = Array.isArray(config.tools) ? config.tools : [];
  const builtinOn = (name: string) => tools.some((t) => (t.type ?? 'builtin') === 'builtin' && t.name === name);
  const otherTools = tools.filter((t) => (t.type ?? 'builtin') !== 'builtin');
  const toggleTool = (name: string, on: boolean) =>
    setConfig('tools', on ? [...tools, { type: 'builtin', name }] : tools.filter((t) => !((t.type ?? 'builtin') === 'builtin' && t.name === name)));

  const clientErrors = useMemo(
    () => ({ maxStep: intProblem(config.maxStep), maxToolOutputLength: intProblem(config.maxToolOutputLength) }),
    [config.maxStep, config.maxToolOutputLength],
  );
  const fieldError = (key: string) => errors.fields[key] || (clientErrors as Record<string, string | null>)[key] || null;

  const switchTab = (next: 'settings' | 'json') => {
    if (next === tab || !draft) return;
    if (next === 'json') {
      setJsonText(JSON.stringify(draft, null, 2));
      setJsonError(null);
    } else {
      const parsed = parseJson(jsonText);
      if (!parsed.ok) return setJsonError(parsed.error);
      setDraft(parsed.value);
    }
    setTab(next);
  };

  const save = async () => {
    if (!draft) return;
    let body = draft;
    if (tab === 'json') {
      const parsed = parseJson(jsonText);
      if (!parsed.ok) return setJsonError(parsed.error);
      body = parsed.value;
    }
    setErrors({ fields: {}, other: [] });
    setJsonError(null);
    const saved = await action.run(async () => {
      try {
        return await api.put<RuleChainDsl>(`/agents/${encodeURIComponent(agentId)}`, body);
      } catch (err) {
        if (err instanceof ApiError && err.status === 400) {
          const agentNode = body.metadata?.nodes?.find((n) => n.type === 'ai/agent');
          const mapped = fieldErrorsOf(err.message, agentNode?.id);
          if (tab === 'json') setJsonError(err.message.split('; ').join('\n'));
          setErrors(mapped);
        }
        throw err;
      }
    });
    if (saved) {
      setDraft(saved);
      if (tab === 'json') setJsonText(JSON.stringify(saved, null, 2));
      setDirty(false);
      notify('Agent saved');
    }
  };

  const reload = async () => {
    const answer = await action.run(() => api.post<{ success: boolean; message?: string }>(`/agents/${encodeURIComponent(agentId)}/reload`));
    if (answer) notify(answer.success ? 'Agent reloaded on every replica' : `Reload failed: ${answer.message ?? ''}`, answer.success ? 'ok' : 'error');
  };

  const remove = async () => {
    if (!window.confirm(`Delete agent "${agentId}" with its rules, skills, workspace and cron jobs? This cannot be undone.`)) return;
    const ok = await action.run(() => api.delete(`/agents/${encodeURIComponent(agentId)}`));
    if (ok) {
      notify(`Agent ${agentId} deleted`);
      navigate('/agents');
    }
  };

  if (loaded.error) {
    return (
      <div className="page">
        <PageHeader title={`Agent ${agentId}`} />
        <ErrorText error={loaded.error} />
      </div>
    );
  }
  if (!draft || !forms || !providers) return <Loading />;

  return (
    <div className="page">
      <PageHeader title={draft.ruleChain.name || agentId}>
        <Link to={`/chat/${encodeURIComponent(agentId)}`} className="button secondary">
          Chat
        </Link>
        <Link to={`/workspace/${encodeURIComponent(agentId)}`} className="button secondary">
          Workspace
        </Link>
        <button type="button" className="secondary" onClick={() => void reload()} disabled={action.busy}>
          Reload
        </button>
        <button type="button" className="danger" onClick={() => void remove()} disabled={action.busy}>
          Delete
        </button>
      </PageHeader>
      <p className="muted">
        Id <code>{agentId}</code>: the <code>model</code> of chat requests to this agent.
      </p>
      <Tabs
        label="Editor"
        value={tab}
        onValue={switchTab}
        tabs={[
          { id: 'settings', label: 'Settings' },
          { id: 'json', label: 'DSL (JSON)' },
        ]}
      />
      <form
        className="form"
        onSubmit={(e) => {
          e.preventDefault();
          void save();
        }}
      >
        {tab === 'settings' ? (
          nodeIndex < 0 ? (
            <Notice kind="warn">This chain has no ai/agent node; edit it as JSON.</Notice>
          ) : (
            <>
              <TextField label="Name" value={draft.ruleChain.name} onValue={(v) => change({ ...draft, ruleChain: { ...draft.ruleChain, name: v } })} error={errors.fields.name} />
              <div className="grid-2">
                <SelectField
                  label="Provider"
                  value={provider}
                  onValue={(v) => setConfig('provider', v || undefined)}
                  error={fieldError('provider')}
                  options={[
                    { value: '', label: `Default${providers.default_provider ? ` (${providers.default_provider})` : ' (none set)'}` },
                    ...providers.providers.map((p) => ({ value: p.id, label: p.name && p.name !== p.id ? `${p.name} (${p.id})` : p.id })),
                    ...(provider && !providers.providers.some((p) => p.id === provider) ? [{ value: provider, label: `${provider} (unknown)` }] : []),
                  ]}
                />
                <TextField
                  label="Model"
                  value={typeof config.model === 'string' ? config.model : ''}
                  onValue={(v) => setConfig('model', v || undefined)}
                  error={fieldError('model')}
                  placeholder={providerView?.model ? `provider default (${providerView.model})` : 'provider default'}
                  list="agent-models"
                />
                <datalist id="agent-models">
                  {providerView?.models.map((m) => (
                    <option key={m.name} value={m.alias ?? m.name}>
                      {m.name}
                    </option>
                  ))}
                </datalist>
              </div>
              <TextArea
                label="System prompt"
                value={typeof config.systemPrompt === 'string' ? config.systemPrompt : ''}
                onValue={(v) => setConfig('systemPrompt', v || undefined)}
                error={fieldError('systemPrompt')}
                rows={8}
                hint={
                  <>
                    <code>{'${include(path)}'}</code> inserts a workspace file, <code>{'${now()}'}</code> the time.
                  </>
                }
              />
              <fieldset className="field">
                <legend>Tools</legend>
                <div className="tool-grid">
                  {forms.tools.map((t) => (
                    <label key={t.name} className="tool-option" title={t.description}>
                      <input type="checkbox" checked={builtinOn(t.name)} onChange={(e) => toggleTool(t.name, e.target.checked)} />
                      <span>
                        <strong>{t.name}</strong>
                        {t.optIn ? <span className="badge warn">opt-in</span> : null}
                        <span className="hint">{firstSentence(t.description)}</span>
                      </span>
                    </label>
                  ))}
                </div>
                {otherTools.length ? (
                  <p className="hint">
                    Also: {otherTools.map((t) => `${String(t.type)} ${String(t.name ?? t.targetId ?? '')}`).join(', ')} (edit these in the DSL tab).
                  </p>
                ) : null}
                <ErrorText error={fieldError('tools')} />
              </fieldset>
              <div className="grid-2">
                <TextField
                  label="Max steps (model calls per answer)"
                  inputMode="numeric"
                  value={config.maxStep === undefined ? '' : String(config.maxStep)}
                  onValue={(v) => setConfig('maxStep', numberOrText(v))}
                  error={fieldError('maxStep')}
                />
                <TextField
                  label="Max tool output (characters)"
                  inputMode="numeric"
                  value={config.maxToolOutputLength === undefined ? '' : String(config.maxToolOutputLength)}
                  onValue={(v) => setConfig('maxToolOutputLength', numberOrText(v))}
                  error={fieldError('maxToolOutputLength')}
                />
                <TextField
                  label="Temperature"
                  inputMode="decimal"
                  value={config.params?.temperature === undefined ? '' : String(config.params.temperature)}
                  onValue={(v) => setParam('temperature', numberOrText(v))}
                  error={fieldError('params')}
                />
                <TextField
                  label="Max tokens per model call"
                  inputMode="numeric"
                  value={config.params?.maxTokens === undefined ? '' : String(config.params.maxTokens)}
                  onValue={(v) => setParam('maxTokens', numberOrText(v))}
                />
              </div>
            </>
          )
        ) : (
          <TextArea
            label="Rule chain DSL"
            className="json-field"
            value={jsonText}
            onValue={(v) => {
              setJsonText(v);
              setDirty(true);
              setJsonError(null);
            }}
            error={jsonError}
            rows={24}
            spellCheck={false}
            hint="The whole agent as stored: ruleChain, metadata.nodes and metadata.connections."
          />
        )}
        {errors.other.length && tab === 'settings' ? (
          <div className="error-text" role="alert">
            <ul>
              {errors.other.map((p) => (
                <li key={p}>{p}</li>
              ))}
            </ul>
          </div>
        ) : null}
        {action.error && !errors.other.length && !Object.values(errors.fields).some(Boolean) && !jsonError ? <ErrorText error={action.error} /> : null}
        <div className="form-actions sticky">
          <button type="submit" disabled={action.busy}>
            {action.busy ? 'Saving…' : 'Save'}
          </button>
          {dirty ? <span className="muted">Unsaved changes</span> : null}
        </div>
      </form>
    </div>
  );
}

function parseJson(text: string): { ok: true; value: RuleChainDsl } | { ok: false; error: string } {
  try {
    const value = JSON.parse(text) as RuleChainDsl;
    if (!value || typeof value !== 'object' || !value.ruleChain || !value.metadata) return { ok: false, error: 'the DSL needs "ruleChain" and "metadata"' };
    return { ok: true, value };
  } catch (err) {
    return { ok: false, error: `not valid JSON: ${messageOf(err)}` };
  }
}
