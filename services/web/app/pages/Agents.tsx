import { useState, type FormEvent } from 'react';
import type { AgentListItem, AgentTemplate, Page, RuleChainDsl } from '@agentry/client';
import { ApiError, api } from '../lib/api';
import { useAction, useLoad } from '../lib/hooks';
import { Link, navigate } from '../lib/router';
import { ErrorText, Loading, PageHeader, TextArea, TextField, idProblem } from '../components/ui';
import { useApp } from '../context';

export function AgentsPage() {
  const agents = useLoad(() => api.get<Page<AgentListItem>>('/agents?size=100'), []);
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
