import { useCallback, useEffect, useMemo, useState, type FormEvent } from 'react';
import { AGENT_FIELD_HINTS, agentConfigSchema, fieldErrorsOf, isCheckboxTool, splitProblems, toggleBuiltin, withOtherTools, type FieldErrors, type ToolEntry } from '../lib/agent-form';
import { ApiError, api, messageOf } from '../lib/api';
import { useAction, useLoad } from '../lib/hooks';
import { Link, navigate } from '../lib/router';
import { clearProblemsAt, clientProblems, fieldIds, fieldsOf, type FieldHint, type JsonSchema } from '../lib/schema-form';
import type { AgentListItem, AgentTemplate, Paged, Provider, RuleChainDsl, ToolForms } from '../lib/types';
import { JsonField, SchemaForm, type CustomFieldProps } from '../components/SchemaForm';
import { ErrorText, Loading, Notice, PageHeader, Tabs, TextArea, TextField, idProblem } from '../components/ui';
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

type AgentConfig = Record<string, unknown>;

/** The first sentence of a tool's description (the whole one is the label's title). */
function firstSentence(text: string): string {
  const m = /^.*?[.!?](?=\s|$)/s.exec(text.trim());
  return (m ? m[0] : text).replace(/\s+/g, ' ');
}

const NO_ERRORS: FieldErrors = { fields: {}, name: null, other: [] };

export function AgentEditPage({ agentId }: { agentId: string }) {
  const { notify } = useApp();
  const loaded = useLoad(
    () =>
      Promise.all([
        api.get<RuleChainDsl>(`/agents/${encodeURIComponent(agentId)}`),
        api.get<ToolForms>('/tools/forms'),
        // The providers for the provider select, with the default's id; without them the field is the schema's text.
        api.get<{ default_provider: string; providers: Provider[] }>('/config/models').catch(() => null),
      ]),
    [agentId],
  );
  const [draft, setDraft] = useState<RuleChainDsl | null>(null);
  const [tab, setTab] = useState<'settings' | 'json'>('settings');
  const [jsonText, setJsonText] = useState('');
  const [jsonError, setJsonError] = useState<string | null>(null);
  const [errors, setErrors] = useState<FieldErrors>(NO_ERRORS);
  /** JSON or list text of the settings form that does not parse (so it is not in the draft), by field id. */
  const [textProblems, setTextProblems] = useState<Record<string, string>>({});
  const [formError, setFormError] = useState<string | null>(null);
  const [dirty, setDirty] = useState(false);
  const action = useAction();

  useEffect(() => {
    if (loaded.data) setDraft(loaded.data[0]);
  }, [loaded.data]);

  const forms = loaded.data?.[1];
  const providers = loaded.data?.[2] ?? null;
  const nodeIndex = draft ? draft.metadata.nodes.findIndex((n) => n.type === 'ai/agent') : -1;
  const node = draft && nodeIndex >= 0 ? draft.metadata.nodes[nodeIndex] : undefined;
  const config = (node?.configuration ?? {}) as AgentConfig;
  const provider = typeof config.provider === 'string' ? config.provider : '';
  const providerView = providers?.providers.find((p) => p.id === (provider || providers.default_provider));

  // The form: the ai/agent configuration schema of GET /tools/forms, with what the page knows besides.
  const agentSchema = forms?.nodes.find((n) => n.type === 'ai/agent')?.configuration as JsonSchema | undefined;
  const hints = useMemo<Record<string, FieldHint>>(
    () => ({
      ...AGENT_FIELD_HINTS,
      ...(providers
        ? {
            provider: {
              options: providers.providers.map((p) => ({ value: p.id, label: p.name && p.name !== p.id ? `${p.name} (${p.id})` : p.id })),
              emptyLabel: `Default${providers.default_provider ? ` (${providers.default_provider})` : ' (none set)'}`,
            },
          }
        : {}),
      model: {
        placeholder: providerView?.model ? `provider default (${providerView.model})` : 'provider default',
        suggestions: providerView?.models.map((m) => ({ value: m.alias ?? m.name, label: m.name })) ?? [],
      },
    }),
    [providers, providerView],
  );
  const fields = useMemo(() => (agentSchema ? fieldsOf(agentConfigSchema(agentSchema), hints) : []), [agentSchema, hints]);
  const ids = useMemo(() => fieldIds(fields), [fields]);
  const checks = useMemo(() => clientProblems(fields, config), [fields, config]);
  const fieldErrors = useMemo(() => {
    const out: Record<string, string> = { ...checks };
    for (const [id, text] of Object.entries(errors.fields)) if (text) out[id] = text;
    return out;
  }, [checks, errors.fields]);

  const change = (next: RuleChainDsl) => {
    setDraft(next);
    setDirty(true);
    setFormError(null);
  };
  const setConfig = (next: AgentConfig, id: string) => {
    if (!draft || nodeIndex < 0) return;
    const nodes = draft.metadata.nodes.map((n, i) => (i === nodeIndex ? { ...n, configuration: next } : n));
    change({ ...draft, metadata: { ...draft.metadata, nodes } });
    setErrors((e) => ({ ...e, fields: clearProblemsAt(e.fields, id) }));
  };
  const onTextProblem = useCallback(
    (id: string, problem: string | null) =>
      setTextProblems((all) => {
        if ((all[id] ?? null) === problem) return all;
        const { [id]: _gone, ...rest } = all;
        return problem ? { ...rest, [id]: problem } : rest;
      }),
    [],
  );
  const unparsed = Object.keys(textProblems).length > 0 ? 'Some JSON or list text above does not parse yet; fix it (or empty it) first.' : null;

  const builtinNames = useMemo(() => forms?.tools.map((t) => t.name) ?? [], [forms]);
  const renderTools = ({ field, value, error, onValue }: CustomFieldProps) => {
    if (!forms) return undefined;
    const tools = Array.isArray(value) ? (value as ToolEntry[]) : [];
    const others = tools.filter((t) => !isCheckboxTool(t, builtinNames));
    const set = (next: ToolEntry[]) => onValue(next.length > 0 ? next : undefined);
    return (
      <fieldset className={`field wide${error ? ' has-error' : ''}`}>
        <legend>{field.label}</legend>
        <div className="tool-grid">
          {forms.tools.map((t) => (
            <label key={t.name} className="tool-option" title={t.description}>
              <input type="checkbox" checked={tools.some((e) => isCheckboxTool(e, [t.name]))} onChange={(e) => set(toggleBuiltin(tools, t.name, e.target.checked))} />
              <span>
                <strong>{t.name}</strong>
                {t.optIn ? <span className="badge warn">opt-in</span> : null}
                <span className="hint">{firstSentence(t.description)}</span>
              </span>
            </label>
          ))}
        </div>
        <JsonField
          label="Other tools (JSON)"
          schema={forms.toolEntry ? { type: 'array', items: forms.toolEntry as JsonSchema } : field.schema}
          value={others.length > 0 ? others : undefined}
          error={null}
          help={`Entries of kind ${forms.toolKinds.filter((k) => k !== 'builtin').join(', ')}, and built-in tools this server does not list. Stored secrets (Authorization and other credential headers, tokens) show as "[secret]": leave that to keep one, write a new value to replace it, empty it to remove it.`}
          className="wide"
          onValue={(next) => set(withOtherTools(tools, builtinNames, Array.isArray(next) ? (next as ToolEntry[]) : []))}
          onProblem={(p) => onTextProblem('tools.*', p)}
        />
        <ErrorText error={error} />
      </fieldset>
    );
  };

  const switchTab = (next: 'settings' | 'json') => {
    if (next === tab || !draft) return;
    if (next === 'json') {
      if (unparsed) return setFormError(unparsed);
      setJsonText(JSON.stringify(draft, null, 2));
      setJsonError(null);
    } else {
      const parsed = parseJson(jsonText);
      if (!parsed.ok) return setJsonError(parsed.error);
      setDraft(parsed.value);
    }
    setFormError(null);
    setTab(next);
  };

  const save = async () => {
    if (!draft) return;
    let body = draft;
    if (tab === 'json') {
      const parsed = parseJson(jsonText);
      if (!parsed.ok) return setJsonError(parsed.error);
      body = parsed.value;
    } else if (unparsed) return setFormError(unparsed);
    setErrors(NO_ERRORS);
    setJsonError(null);
    setFormError(null);
    const saved = await action.run(async () => {
      try {
        return await api.put<RuleChainDsl>(`/agents/${encodeURIComponent(agentId)}`, body);
      } catch (err) {
        if (err instanceof ApiError && err.status === 400) {
          const agentNode = body.metadata?.nodes?.find((n) => n.type === 'ai/agent');
          if (tab === 'json') setJsonError(splitProblems(err.message).join('\n'));
          setErrors(fieldErrorsOf(err.message, agentNode?.id, ids));
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
  if (!draft || !forms) return <Loading />;

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
        // The checks are ours (at the field, in words) and the server's; the browser's bubbles would hide the server's.
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          void save();
        }}
      >
        {tab === 'settings' ? (
          nodeIndex < 0 || !agentSchema ? (
            <Notice kind="warn">{nodeIndex < 0 ? 'This chain has no ai/agent node' : 'The server describes no ai/agent configuration'}; edit it as JSON.</Notice>
          ) : (
            <>
              <TextField label="Name" value={draft.ruleChain.name} onValue={(v) => change({ ...draft, ruleChain: { ...draft.ruleChain, name: v } })} error={errors.name} />
              <SchemaForm fields={fields} value={config} onChange={setConfig} errors={fieldErrors} custom={{ tools: renderTools }} onTextProblem={onTextProblem} />
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
        <ErrorText error={formError} />
        {action.error && !errors.other.length && !errors.name && !Object.values(errors.fields).some(Boolean) && !jsonError ? <ErrorText error={action.error} /> : null}
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
