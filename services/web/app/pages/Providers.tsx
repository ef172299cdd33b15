import { useState, type FormEvent } from 'react';
import { ApiError, api } from '../lib/api';
import { useAction, useLoad } from '../lib/hooks';
import type { Provider, ProviderModel, ProviderTest } from '@agentry/client';
import { CheckboxField, ErrorText, Loading, Notice, PageHeader, Progress, SelectField, TextArea, TextField, idProblem } from '../components/ui';
import { adminOnlyReason } from '../lib/permissions';
import { useApp } from '../context';

/** `name alias context_window` per line <-> models[]. */
function modelsToText(models: ProviderModel[]): string {
  return models.map((m) => [m.name, m.alias ?? '', m.context_window ?? ''].join(' ').trim()).join('\n');
}
function textToModels(text: string): ProviderModel[] {
  return text
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .filter((parts) => parts[0])
    .map(([name, alias, ctx]) => ({
      name: name!,
      ...(alias && alias !== '-' ? { alias } : {}),
      ...(ctx && /^\d+$/.test(ctx) ? { context_window: Number(ctx) } : {}),
    }));
}

/** The providers' overview, and what the page's buttons do to it. */
/** A connection test under way since this time (the gateway waits up to 10 s for the provider). */
type Running = { running: number };
const isRunning = (t: ProviderTest | Running | undefined): t is Running => t !== undefined && 'running' in t;

function useProviders() {
  const { notify } = useApp();
  const overview = useLoad(() => api.get<{ default_provider: string; providers: Provider[] }>('/config/models'), []);
  const [tests, setTests] = useState<Record<string, ProviderTest | Running>>({});
  const action = useAction();

  const setDefault = async (id: string) => {
    if (await action.run(() => api.put('/config', { models: { default_provider: id } }))) {
      overview.reload();
      notify(`Default provider: ${id || 'none'}`);
    }
  };
  const test = async (id: string) => {
    setTests((t) => ({ ...t, [id]: { running: Date.now() } }));
    try {
      const result = await api.post<ProviderTest>(`/config/models/providers/${encodeURIComponent(id)}/test`);
      setTests((t) => ({ ...t, [id]: result }));
    } catch (err) {
      setTests((t) => ({ ...t, [id]: { ok: false, latencyMs: 0, method: 'models', error: err instanceof Error ? err.message : String(err) } }));
    }
  };
  const remove = async (p: Provider) => {
    if (!window.confirm(`Delete model provider "${p.id}"?`)) return;
    if (await action.run(() => api.delete(`/config/models/providers/${encodeURIComponent(p.id)}`))) {
      overview.reload();
      notify(`Provider ${p.id} deleted`);
    }
  };
  return { overview, tests, action, setDefault, test, remove, notify };
}

export function ProvidersPage() {
  const { overview, tests, action, setDefault, test, remove, notify } = useProviders();
  const [editing, setEditing] = useState<Provider | 'new' | null>(null);
  const why = adminOnlyReason(useApp().status, 'model providers');

  const data = overview.data;
  return (
    <div className="page">
      <PageHeader title="Model providers">
        <button type="button" onClick={() => setEditing(editing === 'new' ? null : 'new')} aria-expanded={editing === 'new'} disabled={why !== null} title={why ?? undefined}>
          Add provider
        </button>
      </PageHeader>
      <p className="muted">OpenAI-compatible endpoints the agents call. API keys are write-only: stored sealed, never shown.</p>
      {why ? <Notice>{why} You can see them; an admin adds, edits, tests and deletes them.</Notice> : null}
      <ErrorText error={overview.error ?? action.error} />
      {editing === 'new' ? (
        <ProviderForm
          onDone={(p) => {
            setEditing(null);
            overview.reload();
            notify(`Provider ${p.id} added`);
          }}
          onCancel={() => setEditing(null)}
        />
      ) : null}
      {!data ? (
        <Loading />
      ) : (
        <>
          <div className="card">
            <SelectField
              label="Default provider (agents that name none)"
              value={data.default_provider}
              onValue={(v) => void setDefault(v)}
              disabled={why !== null}
              options={[...(data.default_provider ? [] : [{ value: '', label: 'None' }]), ...data.providers.map((p) => ({ value: p.id, label: p.id }))]}
            />
          </div>
          {data.providers.length === 0 ? <p className="muted">No providers yet: add one so that agents can answer.</p> : null}
          {data.providers.map((p) => (
            <ProviderCard
              key={p.id}
              provider={p}
              isDefault={p.id === data.default_provider}
              test={tests[p.id]}
              why={why}
              editing={editing !== 'new' && editing?.id === p.id}
              onTest={() => void test(p.id)}
              onEdit={() => setEditing(editing !== 'new' && editing?.id === p.id ? null : p)}
              onDelete={() => void remove(p)}
              onSaved={() => {
                setEditing(null);
                overview.reload();
                notify(`Provider ${p.id} saved`);
              }}
              onCancel={() => setEditing(null)}
            />
          ))}
        </>
      )}
    </div>
  );
}

function testText(t: ProviderTest): string {
  return t.ok
    ? `Connected in ${t.latencyMs} ms${t.models?.length ? `; models: ${t.models.slice(0, 10).join(', ')}${t.models.length > 10 ? ', …' : ''}` : ''}.`
    : `Failed${t.latencyMs ? ` after ${t.latencyMs} ms` : ''}: ${t.error ?? 'unknown error'}`;
}

/** One provider: what it is, its last connection test, and its form when open. */
function ProviderCard({
  provider: p,
  isDefault,
  test: t,
  why,
  editing,
  onTest,
  onEdit,
  onDelete,
  onSaved,
  onCancel,
}: {
  provider: Provider;
  isDefault: boolean;
  test: ProviderTest | Running | undefined;
  why: string | null;
  editing: boolean;
  onTest: () => void;
  onEdit: () => void;
  onDelete: () => void;
  onSaved: () => void;
  onCancel: () => void;
}) {
  return (
    <section className="card" aria-labelledby={`provider-${p.id}`} data-provider={p.id}>
      <div className="card-header">
        <h2 id={`provider-${p.id}`}>
          {p.name} {p.name !== p.id ? <code className="muted">{p.id}</code> : null} {isDefault ? <span className="badge ok">default</span> : null}
        </h2>
        <div className="row-actions">
          <button type="button" className="secondary" onClick={onTest} disabled={isRunning(t) || why !== null} title={why ?? undefined}>
            {isRunning(t) ? 'Testing…' : 'Test connection'}
          </button>
          <button type="button" className="secondary" onClick={onEdit} disabled={why !== null} title={why ?? undefined}>
            Edit
          </button>
          <button type="button" className="danger" onClick={onDelete} disabled={why !== null} title={why ?? undefined}>
            Delete
          </button>
        </div>
      </div>
      <dl className="facts">
        <dt>Base URL</dt>
        <dd>
          <code>{p.base_url}</code>
        </dd>
        <dt>Default model</dt>
        <dd>{p.model || '—'}</dd>
        <dt>Models</dt>
        <dd>{p.models.length ? p.models.map((m) => (m.alias ? `${m.name} (${m.alias})` : m.name)).join(', ') : 'any'}</dd>
        <dt>API key</dt>
        <dd>{p.hasApiKey ? 'set' : 'none'}</dd>
      </dl>
      {isRunning(t) ? <Progress label={`Testing the connection to ${p.id}`} since={t.running} /> : null}
      {t && !isRunning(t) ? (
        <p className={t.ok ? 'test-result ok' : 'test-result error-text'} role="status">
          {testText(t)}
        </p>
      ) : null}
      {editing ? <ProviderForm provider={p} onDone={onSaved} onCancel={onCancel} /> : null}
    </section>
  );
}

function ProviderForm({ provider, onDone, onCancel }: { provider?: Provider; onDone: (p: Provider) => void; onCancel: () => void }) {
  const [id, setId] = useState(provider?.id ?? '');
  const [name, setName] = useState(provider?.name ?? '');
  const [baseUrl, setBaseUrl] = useState(provider?.base_url ?? 'https://api.openai.com/v1');
  const [apiKey, setApiKey] = useState('');
  const [removeKey, setRemoveKey] = useState(false);
  const [model, setModel] = useState(provider?.model ?? '');
  const [models, setModels] = useState(modelsToText(provider?.models ?? []));
  const [errors, setErrors] = useState<Record<string, string>>({});
  const action = useAction();
  const moved = provider !== undefined && baseUrl !== provider.base_url;

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const idError = provider ? null : idProblem(id, 'Id');
    setErrors(idError ? { id: idError } : {});
    if (idError) return;
    const body: Record<string, unknown> = { name: name || id, base_url: baseUrl, model, models: textToModels(models) };
    if (apiKey) body.api_key = apiKey;
    else if (removeKey && provider) body.api_key = null;
    const saved = await action.run(async () => {
      try {
        return provider
          ? await api.put<Provider>(`/config/models/providers/${encodeURIComponent(provider.id)}`, body)
          : await api.post<Provider>('/config/models/providers', { id, ...body });
      } catch (err) {
        if (err instanceof ApiError) {
          if (err.status === 409) setErrors({ id: err.message });
          const m = /^(?:body\/)?(base_url|models|model|name|id|api_key)\b:?\s*(.*)$/.exec(err.message);
          if (m && err.status === 400) setErrors({ [m[1]!]: err.message });
        }
        throw err;
      }
    });
    if (saved) onDone(saved);
  };

  return (
    <form className="form card" onSubmit={(e) => void submit(e)} aria-label={provider ? `Edit provider ${provider.id}` : 'New provider'}>
      <div className="grid-2">
        {!provider ? <TextField label="Id" value={id} onValue={setId} error={errors.id} required autoFocus /> : null}
        <TextField label="Name" value={name} onValue={setName} error={errors.name} />
        <TextField label="Base URL" value={baseUrl} onValue={setBaseUrl} error={errors.base_url} required type="url" />
        <TextField
          label="API key"
          type="password"
          autoComplete="new-password"
          value={apiKey}
          onValue={setApiKey}
          error={errors.api_key}
          placeholder={provider?.hasApiKey ? (moved ? 'cleared: the base URL changed' : 'unchanged (write-only)') : ''}
          hint={
            moved && provider?.hasApiKey
              ? 'A new base URL clears the stored key (it never goes to another host): enter the key for the new one.'
              : 'Write-only: stored sealed, never shown again.'
          }
        />
        <TextField label="Default model" value={model} onValue={setModel} error={errors.model} />
      </div>
      <TextArea label="Models" value={models} onValue={setModels} rows={3} error={errors.models} hint="One per line: name, then optionally an alias (default marks the default) and the context window." spellCheck={false} />
      {provider?.hasApiKey ? <CheckboxField label="Remove the stored API key" checked={removeKey} onChecked={setRemoveKey} /> : null}
      {!Object.values(errors).some(Boolean) ? <ErrorText error={action.error} /> : null}
      <div className="form-actions">
        <button type="submit" disabled={action.busy}>
          {action.busy ? 'Saving…' : provider ? 'Save provider' : 'Add provider'}
        </button>
        <button type="button" className="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
