import { Suspense, lazy, useCallback, useEffect, useMemo, useState } from 'react';
import { AGENT_FIELD_HINTS, agentConfigSchema, fieldErrorsOf, isCheckboxTool, splitProblems, toggleBuiltin, withOtherTools, type FieldErrors, type ToolEntry } from '../lib/agent-form';
import { ApiError, api, fetchAll, takeWarnings } from '../lib/api';
import { useAction, useLoad } from '../lib/hooks';
import { Link, navigate, useLeaveGuard } from '../lib/router';
import { anchorProblems, chainGraph, type SaveProblem } from '../lib/chain-graph';
import { chainIssues, textIssues, type ChainIssue } from '../lib/chain-validate';
import { clearProblemsAt, clientProblems, fieldIds, fieldsOf, type Field, type FieldHint, type JsonSchema } from '../lib/schema-form';
import type { AgentListItem, Provider, RuleChainDsl, ToolForms } from '@agentry/client';
import { notOwnerReason } from '../lib/permissions';
import { JsonField, SchemaForm, type CustomFieldProps } from '../components/SchemaForm';
import { DslField } from '../components/DslField';
import { jsonSyntaxProblem, lineOf } from '../lib/code-lines';
import { ErrorText, Loading, Notice, PageHeader, Tabs, TextField } from '../components/ui';
import { useApp } from '../context';

type AgentConfig = Record<string, unknown>;
type EditorTab = 'settings' | 'canvas' | 'json';

// The canvas (React Flow) is its own chunk: only the Canvas tab loads it.
const ChainCanvas = lazy(() => import('../components/ChainCanvas').then((m) => ({ default: m.ChainCanvas })));
type ProviderList = { default_provider: string; providers: Provider[] } | null;
type TextProblemSink = (id: string, problem: string | null) => void;

/** The first sentence of a tool's description (the whole one is the label's title). */
function firstSentence(text: string): string {
  const m = /^.*?[.!?](?=\s|$)/s.exec(text.trim());
  return (m ? m[0] : text).replace(/\s+/g, ' ');
}

const NO_ERRORS: FieldErrors = { fields: {}, name: null, other: [] };

/** The agent, the forms the server describes, and the providers; the draft starts as the agent. */
function useAgentDraft(agentId: string) {
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
  useEffect(() => {
    if (loaded.data) setDraft(loaded.data[0]);
  }, [loaded.data]);
  const nodeIndex = draft ? draft.metadata.nodes.findIndex((n) => n.type === 'ai/agent') : -1;
  const node = draft && nodeIndex >= 0 ? draft.metadata.nodes[nodeIndex] : undefined;
  return {
    loadError: loaded.error,
    forms: loaded.data?.[1],
    providers: loaded.data?.[2] ?? null,
    draft,
    setDraft,
    nodeIndex,
    config: (node?.configuration ?? {}) as AgentConfig,
  };
}

/** The form: the ai/agent configuration schema of GET /tools/forms, with what the page knows besides. */
function useAgentFields(forms: ToolForms | undefined, providers: ProviderList, config: AgentConfig, errors: FieldErrors) {
  const provider = typeof config.provider === 'string' ? config.provider : '';
  const providerView = providers?.providers.find((p) => p.id === (provider || providers.default_provider));
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
  return { agentSchema, fields, ids, fieldErrors };
}

/** JSON or list text of the settings form that does not parse (so it is not in the draft), by field id. */
function useTextProblems() {
  const [textProblems, setTextProblems] = useState<Record<string, string>>({});
  const onTextProblem = useCallback<TextProblemSink>(
    (id, problem) =>
      setTextProblems((all) => {
        if ((all[id] ?? null) === problem) return all;
        const { [id]: _gone, ...rest } = all;
        return problem ? { ...rest, [id]: problem } : rest;
      }),
    [],
  );
  const unparsed = Object.keys(textProblems).length > 0 ? 'Some JSON or list text above does not parse yet; fix it (or empty it) first.' : null;
  return { onTextProblem, unparsed };
}

/** The tools field: a checkbox per built-in tool, the other entries as JSON. Called by SchemaForm for `tools`. */
function renderToolsField(forms: ToolForms, onTextProblem: TextProblemSink, { field, value, error, onValue }: CustomFieldProps) {
  const builtinNames = forms.tools.map((t) => t.name);
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
}

/** Everything the edit page holds: the draft, the tab, the JSON text, the errors, and what the buttons do. */
function useAgentEditor(agentId: string) {
  const { notify } = useApp();
  const data = useAgentDraft(agentId);
  const { draft, setDraft, nodeIndex } = data;
  const [tab, setTab] = useState<EditorTab>('settings');
  const [jsonText, setJsonText] = useState('');
  const [jsonError, setJsonError] = useState<string | null>(null);
  const [errors, setErrors] = useState<FieldErrors>(NO_ERRORS);
  const [formError, setFormError] = useState<string | null>(null);
  const [saveProblems, setSaveProblems] = useState<SaveProblem[]>([]);
  const [dirty, setDirty] = useState(false);
  const [focusNode, setFocusNode] = useState<{ id: string } | null>(null);
  const action = useAction();
  useLeaveGuard(dirty ? 'This agent has unsaved changes. Leave without saving them?' : null);
  // What the canvas finds from the node types' schemas: a blocker stops Save, in the DSL tab as
  // on the canvas (its text as it is typed; one that does not parse is refused on Save, by line).
  const blockers = useMemo<ChainIssue[]>(() => {
    if (!data.forms) return [];
    const found = tab === 'json' ? textIssues(jsonText, data.forms) : draft ? chainIssues(chainGraph(draft), data.forms) : [];
    return found.filter((i) => i.blocker);
  }, [draft, data.forms, tab, jsonText]);
  // A blocker clicked: its node on the canvas, or its line in the DSL tab.
  const showNode = (id: string) => {
    if (tab === 'settings') switchTab('canvas');
    setFocusNode({ id });
  };
  const form = useAgentFields(data.forms, data.providers, data.config, errors);
  const { onTextProblem, unparsed } = useTextProblems();

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
  const editJson = (v: string) => {
    setJsonText(v);
    setDirty(true);
    setJsonError(null);
  };
  const switchTab = (next: EditorTab) => {
    if (next === tab || !draft) return;
    if (next === 'json') {
      if (unparsed) return setFormError(unparsed);
      setJsonText(JSON.stringify(draft, null, 2));
      setJsonError(null);
    } else if (tab === 'json') {
      const parsed = parseJson(jsonText);
      if (!parsed.ok) return setJsonError(parsed.error);
      setDraft(parsed.value);
    }
    setFormError(null);
    setTab(next);
  };
  const state = { tab, jsonText, jsonError, errors, formError, dirty, action, unparsed, saveProblems };
  const setters = { setDraft, setJsonText, setJsonError, setErrors, setFormError, setDirty, setSaveProblems };
  const buttons = useAgentButtons(agentId, draft, state, setters, form.ids, notify);
  return { ...data, ...form, ...state, change, setConfig, editJson, switchTab, onTextProblem, blockers, focusNode, showNode, ...buttons };
}

interface EditorState {
  tab: EditorTab;
  jsonText: string;
  action: ReturnType<typeof useAction>;
  unparsed: string | null;
}

interface EditorSetters {
  setDraft: (d: RuleChainDsl) => void;
  setJsonText: (t: string) => void;
  setJsonError: (e: string | null) => void;
  setErrors: (e: FieldErrors) => void;
  setFormError: (e: string | null) => void;
  setDirty: (d: boolean) => void;
  setSaveProblems: (p: SaveProblem[]) => void;
}

/** Save (from either tab, the server's 400 spread over the fields), reload and delete. */
function useAgentButtons(agentId: string, draft: RuleChainDsl | null, state: EditorState, set: EditorSetters, ids: string[], notify: (text: string, kind?: 'ok' | 'error') => void) {
  const { tab, jsonText, action, unparsed } = state;
  const save = async () => {
    if (!draft) return;
    let body = draft;
    if (tab === 'json') {
      const parsed = parseJson(jsonText);
      if (!parsed.ok) return set.setJsonError(parsed.error);
      body = parsed.value;
    } else if (unparsed) return set.setFormError(unparsed);
    set.setErrors(NO_ERRORS);
    set.setSaveProblems([]);
    set.setJsonError(null);
    set.setFormError(null);
    const saved = await action.run(async () => {
      try {
        takeWarnings();
        return await api.put<RuleChainDsl>(`/agents/${encodeURIComponent(agentId)}`, body);
      } catch (err) {
        if (err instanceof ApiError && err.status === 400) {
          const agentNode = body.metadata?.nodes?.find((n) => n.type === 'ai/agent');
          const problems = splitProblems(err.message);
          if (tab === 'json') set.setJsonError(`Save refused: ${problems.length === 1 ? 'one problem' : `${problems.length} problems`}, each marked on its line below.`);
          set.setErrors(fieldErrorsOf(err.message, agentNode?.id, ids));
          set.setSaveProblems(anchorProblems(problems, body));
        }
        throw err;
      }
    });
    if (saved) {
      set.setDraft(saved);
      if (tab === 'json') set.setJsonText(JSON.stringify(saved, null, 2));
      set.setDirty(false);
      // Fields a node type does not name are kept (the server's fieldValidation=Warn): each shows
      // on its node, as a refused setting would, so that a misspelt one is seen.
      const warned = takeWarnings();
      set.setSaveProblems(anchorProblems(warned, saved));
      notify(warned.length ? `Agent saved, with ${warned.length} warning${warned.length === 1 ? '' : 's'}: ${warned.join('; ')}` : 'Agent saved');
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
      navigate('/agents', { force: true });
    }
  };
  return { save, reload, remove };
}

/**
 * The agent's owner (from the agents list, which names it) and why the viewer may not change the
 * agent, or null: Save, Reload and Delete are the owner's and admins' (the gateway's 403 otherwise).
 */
function useAgentOwner(agentId: string): { owner: string | undefined; why: string | null } {
  const agents = useLoad(() => fetchAll<AgentListItem>('/agents'), []);
  const owner = agents.data?.find((a) => a.ruleChain.id === agentId)?.ruleChain.owner;
  return { owner, why: notOwnerReason(useApp().status, owner, 'agent') };
}

export function AgentEditPage({ agentId }: { agentId: string }) {
  const editor = useAgentEditor(agentId);
  const { owner, why } = useAgentOwner(agentId);
  const { draft, forms, tab, action } = editor;
  if (editor.loadError) {
    return (
      <div className="page">
        <PageHeader title={`Agent ${agentId}`} />
        <ErrorText error={editor.loadError} />
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
        <button type="button" className="secondary" onClick={() => void editor.reload()} disabled={action.busy || why !== null} title={why ?? undefined}>
          Reload
        </button>
        <button type="button" className="danger" onClick={() => void editor.remove()} disabled={action.busy || why !== null} title={why ?? undefined}>
          Delete
        </button>
      </PageHeader>
      <p className="muted">
        Id <code>{agentId}</code>: the <code>model</code> of chat requests to this agent.{owner ? <> Owner: <strong className="agent-owner">{owner}</strong>.</> : null}
      </p>
      {why ? <Notice>{why} You may read it, chat with it and try changes here, but not save them.</Notice> : null}
      <Tabs
        label="Editor"
        value={tab}
        onValue={editor.switchTab}
        tabs={[
          { id: 'settings', label: 'Settings' },
          { id: 'canvas', label: 'Canvas' },
          { id: 'json', label: 'DSL (JSON)' },
        ]}
      />
      <AgentEditorForm editor={editor} draft={draft} forms={forms} agentId={agentId} why={why} />
    </div>
  );
}

function AgentEditorForm({ editor, draft, forms, agentId, why }: { editor: ReturnType<typeof useAgentEditor>; draft: RuleChainDsl; forms: ToolForms; agentId: string; why: string | null }) {
  const { tab, errors, jsonError, action } = editor;
  return (
    <form
      className={tab === 'canvas' ? 'form wide' : 'form'}
      // The checks are ours (at the field, in words) and the server's; the browser's bubbles would hide the server's.
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        void editor.save();
      }}
    >
      {tab === 'settings' ? (
        <AgentSettingsFields editor={editor} draft={draft} forms={forms} />
      ) : tab === 'canvas' ? (
        <Suspense fallback={<Loading what="Loading the canvas" />}>
          {/* Runs are listed to the owner and admins: another user replays pasted steps only. */}
          <ChainCanvas dsl={draft} forms={forms} problems={editor.saveProblems} onChange={editor.change} focusNode={editor.focusNode} {...(why === null ? { agentId } : {})} />
        </Suspense>
      ) : (
        <DslField text={editor.jsonText} onText={editor.editJson} forms={forms} saveProblems={editor.saveProblems} saveFailed={action.error !== null} error={jsonError} focusNode={editor.focusNode} />
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
      <ErrorText error={editor.formError} />
      {action.error && !errors.other.length && !errors.name && !Object.values(errors.fields).some(Boolean) && !jsonError ? <ErrorText error={action.error} /> : null}
      <div className="form-actions sticky">
        <button type="submit" disabled={action.busy || why !== null || editor.blockers.length > 0} title={why ?? (editor.blockers.length ? 'Fix the problems listed first' : undefined)} aria-describedby={editor.blockers.length ? 'save-blockers' : undefined}>
          {action.busy ? 'Saving…' : 'Save'}
        </button>
        {why ? <span className="muted">{why}</span> : editor.dirty ? <span className="muted">Unsaved changes</span> : null}
        <SaveBlockers blockers={editor.blockers} onShow={editor.showNode} />
      </div>
    </form>
  );
}

/** What stops Save, each naming its node: a click selects that node on the canvas (in the DSL tab, puts the cursor on it). */
function SaveBlockers({ blockers, onShow }: { blockers: ChainIssue[]; onShow: (nodeId: string) => void }) {
  if (blockers.length === 0) return null;
  return (
    <div className="save-blockers" id="save-blockers" role="status">
      Save is blocked by {blockers.length === 1 ? 'this problem' : `these ${blockers.length} problems`}:
      <ul aria-label="What blocks Save">
        {blockers.map((b) => (
          <li key={`${b.nodeId} ${b.edgeId ?? ''} ${b.text}`}>
            <button type="button" onClick={() => onShow(b.nodeId)}>
              {b.nodeId}: {b.text}
            </button>
          </li>
        ))}
      </ul>
    </div>
  );
}

function AgentSettingsFields({ editor, draft, forms }: { editor: ReturnType<typeof useAgentEditor>; draft: RuleChainDsl; forms: ToolForms }) {
  const { nodeIndex, agentSchema, onTextProblem } = editor;
  if (nodeIndex < 0 || !agentSchema) {
    return <Notice kind="warn">{nodeIndex < 0 ? 'This chain has no ai/agent node' : 'The server describes no ai/agent configuration'}; edit it as JSON.</Notice>;
  }
  const fields: Field[] = editor.fields;
  return (
    <>
      <TextField label="Name" value={draft.ruleChain.name} onValue={(v) => editor.change({ ...draft, ruleChain: { ...draft.ruleChain, name: v } })} error={editor.errors.name} />
      <SchemaForm
        fields={fields}
        value={editor.config}
        onChange={editor.setConfig}
        errors={editor.fieldErrors}
        custom={{ tools: (props) => renderToolsField(forms, onTextProblem, props) }}
        onTextProblem={onTextProblem}
      />
    </>
  );
}

function parseJson(text: string): { ok: true; value: RuleChainDsl } | { ok: false; error: string } {
  const syntax = jsonSyntaxProblem(text);
  if (syntax) return { ok: false, error: `Line ${lineOf(text, syntax.from)}: ${syntax.message}` };
  const value = JSON.parse(text) as RuleChainDsl;
  if (!value || typeof value !== 'object' || !value.ruleChain || !value.metadata) return { ok: false, error: 'the DSL needs "ruleChain" and "metadata"' };
  return { ok: true, value };
}
