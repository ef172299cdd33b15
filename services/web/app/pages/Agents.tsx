import { useState, type FormEvent } from 'react';
import type { AgentListItem, AgentTemplate, RuleChainDsl } from '@agentry/client';
import { ApiError, api, fetchAll } from '../lib/api';
import { useAction, useLoad } from '../lib/hooks';
import { filterItems } from '../lib/lists';
import { notOwnerReason } from '../lib/permissions';
import { Link, navigate } from '../lib/router';
import { ErrorText, Loading, PageHeader, SearchField, TextArea, TextField, Why, idProblem } from '../components/ui';
import { useApp } from '../context';

/**
 * Switches an agent on or off through its DSL (`ruleChain.disabled`, RuleGo's own field): the
 * update route is the one write path of an agent, which validates it, keeps its secrets and
 * tells every replica. The DSL read here carries secret markers, which the update resolves.
 */
async function setAgentDisabled(id: string, disabled: boolean): Promise<RuleChainDsl> {
  const dsl = await api.get<RuleChainDsl>(`/agents/${encodeURIComponent(id)}`);
  return api.put<RuleChainDsl>(`/agents/${encodeURIComponent(id)}`, { ...dsl, ruleChain: { ...dsl.ruleChain, disabled } });
}

export function AgentsPage() {
  const { notify } = useApp();
  const agents = useLoad(async () => ({ data: await fetchAll<AgentListItem>('/agents') }), []);
  const [search, setSearch] = useState('');
  const action = useAction();
  const toggle = async (agent: AgentListItem['ruleChain']) => {
    const updated = await action.run(() => setAgentDisabled(agent.id, !agent.disabled));
    if (updated && agents.data) {
      const disabled = updated.ruleChain.disabled === true;
      const data = agents.data.data.map((a) => (a.ruleChain.id === agent.id ? { ruleChain: { ...a.ruleChain, name: updated.ruleChain.name, disabled } } : a));
      agents.set({ data });
      notify(`${agent.id} ${disabled ? 'disabled' : 'enabled'}`);
    }
  };
  return (
    <div className="page">
      <PageHeader title="Agents">
        <Link to="/agents/new" className="button">
          New agent
        </Link>
      </PageHeader>
      <ErrorText error={agents.error ?? action.error} />
      {!agents.data ? (
        <Loading />
      ) : agents.data.data.length === 0 ? (
        <p>
          No agents yet. <Link to="/agents/new">Create one from the template</Link>.
        </p>
      ) : (
        <div className="table-wrap">
          <SearchField label="Search agents" value={search} onValue={setSearch} />
          <AgentsList agents={agents.data.data} search={search} busy={action.busy} onToggle={(a) => void toggle(a)} />
        </div>
      )}
    </div>
  );
}

/** The agents the search leaves, and how many of how many. */
function AgentsList({ agents, search, busy, onToggle }: { agents: AgentListItem[]; search: string; busy: boolean; onToggle: (agent: AgentListItem['ruleChain']) => void }) {
  const shown = filterItems(agents, search, (a) => [a.ruleChain.id, a.ruleChain.name, a.ruleChain.owner]);
  const noun = agents.length === 1 ? 'agent' : 'agents';
  return (
    <>
      <AgentsTable agents={shown} busy={busy} onToggle={onToggle} />
      <p className="muted" role="status">
        {shown.length === agents.length ? `${agents.length} ${noun}` : `${shown.length} of ${agents.length} ${noun}`}
      </p>
    </>
  );
}

/** A disabled agent says so next to its name: it answers no chat, runs no cron job and is not in /models. */
function AgentsTable({ agents, busy, onToggle }: { agents: AgentListItem[]; busy: boolean; onToggle: (agent: AgentListItem['ruleChain']) => void }) {
  const { status } = useApp();
  return (
    <table>
      <thead>
        <tr>
          <th scope="col">Enabled</th>
          <th scope="col">Name</th>
          <th scope="col">Id (the chat model)</th>
          <th scope="col">Owner</th>
          <th scope="col">
            <span className="sr-only">Actions</span>
          </th>
        </tr>
      </thead>
      <tbody>
        {agents.map(({ ruleChain: a }) => {
          const why = notOwnerReason(status, a.owner, 'agent');
          return (
          <tr key={a.id} data-agent={a.id}>
            <td>
              <label className="switch" title={why ?? undefined}>
                <input type="checkbox" checked={!a.disabled} onChange={() => onToggle(a)} disabled={busy || why !== null} aria-describedby={why ? `why-${a.id}` : undefined} />
                <span className="sr-only">Enable {a.id}</span>
              </label>
              {why ? <span id={`why-${a.id}`} className="sr-only">{why}</span> : null}
            </td>
            <td>
              <Link to={`/agents/${encodeURIComponent(a.id)}`}>{a.name || a.id}</Link>
              {a.disabled ? <span className="badge">disabled</span> : null}
            </td>
            <td>
              <code>{a.id}</code>
            </td>
            <td className="owner">
              {a.owner ?? '—'}
              <Why reason={why ? 'read-only for you' : null} />
            </td>
            <td className="actions-cell">
              <div className="row-actions">
                <Link to={`/chat/${encodeURIComponent(a.id)}`}>Chat</Link>
                <Link to={`/workspace/${encodeURIComponent(a.id)}`}>Workspace</Link>
              </div>
            </td>
          </tr>
          );
        })}
      </tbody>
    </table>
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
