import { useEffect, useState, type FormEvent } from 'react';
import { ApiError, api, fetchAll } from '../lib/api';
import { useAction, useLoad } from '../lib/hooks';
import { platformName, type AgentListItem, type Binding, type ChannelAccount, type ChannelPlatformView } from '@agentry/client';
import { CheckboxField, ErrorText, Loading, Notice, PageHeader, SelectField, TextField, idProblem } from '../components/ui';
import { useApp } from '../context';
import { adminOnlyReason, chatStillOpen } from '../lib/permissions';

interface FieldDef {
  key: string;
  label: string;
  secret?: boolean;
  hint?: string;
}

/** The platforms (README "Channels") and the fields of their accounts; secrets are write-only. */
export const PLATFORMS: Array<{ id: string; title: string; fields: FieldDef[] }> = [
  {
    id: 'api',
    title: 'API (OpenAI-compatible clients)',
    fields: [
      { key: 'description', label: 'Description' },
      { key: 'api_key', label: 'API key', secret: true, hint: 'Leave empty to have one generated (shown once). At least 16 characters.' },
    ],
  },
  {
    id: 'chat_a',
    title: 'Lark / Feishu app bot',
    fields: [
      { key: 'app_id', label: 'App ID' },
      { key: 'app_secret', label: 'App secret', secret: true },
      { key: 'token', label: 'Verification token', secret: true },
      { key: 'encrypt_key', label: 'Encrypt key', secret: true },
    ],
  },
  {
    id: 'chat_a_webhook',
    title: 'Lark / Feishu custom-bot webhook (send only)',
    fields: [
      { key: 'app_secret', label: 'Hook token', secret: true },
      { key: 'secret', label: 'Signing key', secret: true },
    ],
  },
  {
    id: 'chat_b',
    title: 'DingTalk robot',
    fields: [
      { key: 'app_id', label: 'AppKey' },
      { key: 'app_secret', label: 'AppSecret', secret: true },
      { key: 'robot_code', label: 'Robot code' },
    ],
  },
  {
    id: 'chat_c',
    title: 'WeCom app',
    fields: [
      { key: 'app_id', label: 'Corp ID' },
      { key: 'app_secret', label: 'App secret', secret: true },
      { key: 'agent_id', label: 'Agent id (WeCom)' },
      { key: 'token', label: 'Callback token', secret: true },
      { key: 'encoding_aes_key', label: 'EncodingAESKey', secret: true },
    ],
  },
  {
    id: 'chat_d',
    title: 'Telegram bot',
    fields: [
      { key: 'app_secret', label: 'Bot token', secret: true },
      { key: 'secret', label: 'Webhook secret token', secret: true },
    ],
  },
  {
    id: 'chat_e',
    title: 'Slack app',
    fields: [
      { key: 'app_secret', label: 'Bot token', secret: true },
      { key: 'signing_secret', label: 'Signing secret', secret: true },
    ],
  },
];

const POLICY_OPTIONS = [
  { value: 'allow', label: 'allow: everyone' },
  { value: 'allowlist', label: 'allowlist: only the ids below' },
  { value: 'disabled', label: 'disabled' },
];
const SCOPE_OPTIONS = ['per_peer', 'main', 'per_channel_peer', 'per_account_channel_peer'].map((s) => ({ value: s, label: s }));

const camel = (snake: string) => snake.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

export function ChannelsPage() {
  const { notify, status, refresh } = useApp();
  // Whether chat already needs a key can have changed elsewhere (a user made their own API key).
  useEffect(() => {
    void refresh();
  }, [refresh]);
  // Accounts and bindings are server-wide: their writes are admin routes (say so, not a 403).
  const why = adminOnlyReason(status, 'channel accounts and bindings');
  const channels = useLoad(() => api.get<{ platforms: Record<string, ChannelPlatformView> }>('/channels'), []);
  const agents = useLoad(async () => ({ data: await fetchAll<AgentListItem>('/agents') }), []);
  const [editing, setEditing] = useState<Editing | null>(null);
  const [createdKey, setCreatedKey] = useState<{ account: string; key: string } | null>(null);
  const action = useAction();

  const remove = async (platform: string, account: ChannelAccount) => {
    if (!window.confirm(`Delete ${platform} account "${account.id}" and its bindings?`)) return;
    if (await action.run(() => api.delete(`/channels/${platform}/accounts/${encodeURIComponent(account.id)}`))) {
      channels.reload();
      notify(`Account ${account.id} deleted`);
    }
  };
  const saved = (account: ChannelAccount, apiKey?: string) => {
    setEditing(null);
    channels.reload();
    void refresh();
    if (apiKey) setCreatedKey({ account: account.id, key: apiKey });
    notify(`Account ${account.id} saved`);
  };

  return (
    <div className="page">
      <PageHeader title="Channels" />
      <p className="muted">Messaging platforms reach agents through accounts; bindings say which agent answers an account.</p>
      {why ? <Notice>{why}</Notice> : null}
      {createdKey ? (
        <Notice kind="ok">
          API key of <strong>{createdKey.account}</strong> (shown this once): <code className="secret-once">{createdKey.key}</code>{' '}
          <button type="button" className="link-button" onClick={() => setCreatedKey(null)}>
            Dismiss
          </button>
        </Notice>
      ) : null}
      <ErrorText error={channels.error ?? action.error} />
      {!channels.data ? (
        <Loading />
      ) : (
        PLATFORMS.map((p) => (
          <PlatformSection
            key={p.id}
            platform={p}
            view={channels.data!.platforms[p.id]}
            editing={editing}
            onEdit={setEditing}
            onRemove={(a) => void remove(p.id, a)}
            agents={agents.data?.data ?? []}
            onSaved={saved}
            why={why}
          />
        ))
      )}
      <Bindings agents={agents.data?.data ?? []} platforms={channels.data?.platforms} why={why} />
    </div>
  );
}

type Platform = (typeof PLATFORMS)[number];
type Editing = { platform: string; account?: ChannelAccount };

/** One platform: its accounts, "Add account", and the open form. */
function PlatformSection({
  platform: p,
  view,
  editing,
  onEdit,
  onRemove,
  agents,
  onSaved,
  why,
}: {
  platform: Platform;
  view: ChannelPlatformView | undefined;
  editing: Editing | null;
  onEdit: (e: Editing | null) => void;
  onRemove: (account: ChannelAccount) => void;
  agents: AgentListItem[];
  onSaved: (account: ChannelAccount, apiKey?: string) => void;
  /** Why the viewer may not change accounts, or null. */
  why: string | null;
}) {
  const { status } = useApp();
  const locked = { disabled: why !== null, title: why ?? undefined };
  const accounts = Object.values(view?.accounts ?? {});
  const open = editing?.platform === p.id;
  return (
    <section className="card platform" aria-labelledby={`platform-${p.id}`} data-platform={p.id}>
      <div className="card-header">
        <h2 id={`platform-${p.id}`}>
          {p.title} <code className="muted">{p.id}</code>
        </h2>
        {view && !view.enabled ? <span className="badge warn">disabled in the configuration file</span> : null}
        <button type="button" className="secondary" onClick={() => onEdit(open && !editing?.account ? null : { platform: p.id })} aria-expanded={open && !editing?.account} {...locked}>
          Add account
        </button>
      </div>
      {accounts.length ? (
        <ul className="account-list">
          {accounts.map((a) => (
            <li key={a.id} data-account={a.id}>
              <div>
                <strong>{a.name || a.id}</strong> <code>{a.id}</code> {a.enabled ? null : <span className="badge">disabled</span>}
                <div className="hint">
                  private chats: {a.dmPolicy} · groups: {a.groupPolicy}
                  {a.hasSecret ? ' · secrets set' : ' · no secrets'}
                </div>
              </div>
              <div className="row-actions">
                <button type="button" className="link-button" onClick={() => onEdit({ platform: p.id, account: a })} {...locked}>
                  Edit
                </button>
                <button type="button" className="link-button danger-text" onClick={() => onRemove(a)} {...locked}>
                  Delete
                </button>
              </div>
            </li>
          ))}
        </ul>
      ) : (
        <p className="muted">No accounts.</p>
      )}
      {open ? (
        <AccountForm
          key={editing?.account?.id ?? 'new'}
          platform={p}
          account={editing?.account}
          agents={agents}
          firstApiKey={p.id === 'api' && !editing?.account && chatStillOpen(status, view, accounts)}
          onDone={onSaved}
          onCancel={() => onEdit(null)}
        />
      ) : null}
    </section>
  );
}

const str = (v: unknown) => (typeof v === 'string' ? v : '');

/** The account form's values, starting from the account (secrets always start empty: write-only). */
function useAccountDraft(platform: Platform, account: ChannelAccount | undefined) {
  const [id, setId] = useState(account?.id ?? '');
  const [name, setName] = useState(account?.name ?? '');
  const [enabled, setEnabled] = useState(account?.enabled ?? true);
  const [dmPolicy, setDmPolicy] = useState(account?.dmPolicy ?? 'allow');
  const [groupPolicy, setGroupPolicy] = useState(account?.groupPolicy ?? 'allow');
  const [allowFrom, setAllowFrom] = useState(Array.isArray(account?.allowFrom) ? (account.allowFrom as string[]).join(', ') : '');
  const [scope, setScope] = useState(str(account?.sessionScope) || 'per_peer');
  const [apiBase, setApiBase] = useState(str(account?.apiBase));
  const [fields, setFields] = useState<Record<string, string>>(() =>
    Object.fromEntries(platform.fields.map((f) => [f.key, f.secret ? '' : f.key === 'app_id' ? (account?.appId ?? '') : str(account?.[camel(f.key)])])),
  );
  const [clearSecrets, setClearSecrets] = useState(false);
  const [bindTo, setBindTo] = useState('');
  return {
    ...{ id, name, enabled, dmPolicy, groupPolicy, allowFrom, scope, apiBase, fields, clearSecrets, bindTo },
    ...{ setId, setName, setEnabled, setDmPolicy, setGroupPolicy, setAllowFrom, setScope, setApiBase, setFields, setClearSecrets, setBindTo },
  };
}

type AccountDraft = ReturnType<typeof useAccountDraft>;

/** The request body (snake_case, as the API takes it); an edit sends null to clear a field. */
function accountBody(platform: Platform, d: AccountDraft, isNew: boolean): Record<string, unknown> {
  const body: Record<string, unknown> = {
    name: d.name || d.id,
    enabled: d.enabled,
    dm_policy: d.dmPolicy,
    group_policy: d.groupPolicy,
    session_scope: d.scope,
  };
  const ids = d.allowFrom
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter(Boolean);
  if (ids.length || !isNew) body.allow_from = ids.length ? ids : null;
  if (d.apiBase || !isNew) body.api_base = d.apiBase || null;
  for (const f of platform.fields) {
    const v = d.fields[f.key] ?? '';
    // Secrets: sent only when typed (blank keeps the stored one), or removed on request.
    if (f.secret) {
      if (v) body[f.key] = v;
      else if (d.clearSecrets && !isNew && !(platform.id === 'api' && f.key === 'api_key')) body[f.key] = null;
    } else if (v || !isNew) body[f.key] = v || null;
  }
  if (isNew) {
    body.id = d.id;
    if (d.bindTo) body.binding = { agentId: d.bindTo };
  }
  return body;
}

function AccountForm({
  platform,
  account,
  agents,
  firstApiKey,
  onDone,
  onCancel,
}: {
  platform: Platform;
  account: ChannelAccount | undefined;
  agents: AgentListItem[];
  /** The account would be the first API key: on an open server, chat stops being anonymous. */
  firstApiKey: boolean;
  onDone: (account: ChannelAccount, apiKey?: string) => void;
  onCancel: () => void;
}) {
  const d = useAccountDraft(platform, account);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const action = useAction();
  const isNew = !account;

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const idError = isNew ? idProblem(d.id, 'Account ID') : null;
    setErrors(idError ? { id: idError } : {});
    if (idError) return;
    const body = accountBody(platform, d, isNew);
    const saved = await action.run(async () => {
      try {
        return isNew
          ? await api.post<ChannelAccount & { apiKey?: string }>(`/channels/${platform.id}/accounts`, body)
          : await api.put<ChannelAccount>(`/channels/${platform.id}/accounts/${encodeURIComponent(account.id)}`, body);
      } catch (err) {
        if (err instanceof ApiError) {
          if (err.status === 409) setErrors({ id: err.message });
          const m = /^([a-z_]+):\s*(.*)$/.exec(err.message);
          if (m && err.status === 400) setErrors({ [m[1]!]: m[2]! });
        }
        throw err;
      }
    });
    if (saved) onDone(saved, (saved as { apiKey?: string }).apiKey);
  };

  const anyError = Object.values(errors).some(Boolean);
  return (
    <form className="form account-form" onSubmit={(e) => void submit(e)} aria-label={isNew ? `New ${platformName(platform.id)} account` : `Edit ${platformName(platform.id)} account ${account.id}`}>
      <h3>{isNew ? 'New account' : `Edit ${account.id}`}</h3>
      {firstApiKey && d.enabled ? (
        <Notice kind="warn">
          <strong>This makes chat key-only.</strong> While no API key exists, anyone may chat with this open server without logging in. Once this account exists,
          every chat (this web UI's too) needs a login or an API key; other pages stay open (security.requireAuth is false).
        </Notice>
      ) : null}
      <AccountFields platform={platform} account={account} d={d} errors={errors} agents={agents} />
      {!anyError ? <ErrorText error={action.error} /> : null}
      <div className="form-actions">
        <button type="submit" disabled={action.busy}>
          {action.busy ? 'Saving…' : isNew ? 'Add account' : 'Save account'}
        </button>
        <button type="button" className="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

function AccountFields({ platform, account, d, errors, agents }: { platform: Platform; account: ChannelAccount | undefined; d: AccountDraft; errors: Record<string, string>; agents: AgentListItem[] }) {
  const isNew = !account;
  return (
    <>
      <div className="grid-2">
        {isNew ? <TextField label="Account ID" value={d.id} onValue={d.setId} error={errors.id} required autoFocus hint="Letters, digits, _ and -." /> : null}
        <TextField label="Name" value={d.name} onValue={d.setName} error={errors.name} />
      </div>
      <div className="grid-2">
        {platform.fields.map((f) => (
          <TextField
            key={f.key}
            label={f.label}
            type={f.secret ? 'password' : 'text'}
            autoComplete={f.secret ? 'new-password' : 'off'}
            value={d.fields[f.key] ?? ''}
            onValue={(v) => d.setFields((x) => ({ ...x, [f.key]: v }))}
            error={errors[f.key]}
            placeholder={f.secret && account?.hasSecret ? 'unchanged (write-only)' : ''}
            hint={f.hint ?? (f.secret ? 'Write-only: never shown again.' : undefined)}
          />
        ))}
      </div>
      <AccountPolicyFields platform={platform} account={account} d={d} errors={errors} />
      <CheckboxField label="Enabled" checked={d.enabled} onChecked={d.setEnabled} />
      {!isNew && account.hasSecret && platform.id !== 'api' ? (
        <CheckboxField label="Remove the secrets left empty above" checked={d.clearSecrets} onChecked={d.setClearSecrets} />
      ) : null}
      {isNew ? (
        <SelectField
          label="Answer with agent"
          value={d.bindTo}
          onValue={d.setBindTo}
          options={[{ value: '', label: 'No binding yet' }, ...agents.map((a) => ({ value: a.ruleChain.id, label: a.ruleChain.name || a.ruleChain.id }))]}
          hint="Creates a binding of this account to the agent."
        />
      ) : null}
    </>
  );
}

/** Who may talk to the account, the session scope, and the platform's address. */
function AccountPolicyFields({ platform, account, d, errors }: { platform: Platform; account: ChannelAccount | undefined; d: AccountDraft; errors: Record<string, string> }) {
  return (
    <>
      {platform.id !== 'api' && platform.id !== 'chat_a_webhook' ? (
        <div className="grid-3">
          <SelectField label="Private chats" value={d.dmPolicy} onValue={d.setDmPolicy} options={POLICY_OPTIONS} error={errors.dm_policy} />
          <SelectField label="Group chats" value={d.groupPolicy} onValue={d.setGroupPolicy} options={POLICY_OPTIONS} error={errors.group_policy} />
          <SelectField label="Session scope" value={d.scope} onValue={d.setScope} options={SCOPE_OPTIONS} error={errors.session_scope} />
        </div>
      ) : null}
      {d.dmPolicy === 'allowlist' || d.groupPolicy === 'allowlist' ? (
        <TextField label="Allowed ids" value={d.allowFrom} onValue={d.setAllowFrom} error={errors.allow_from} hint="User or chat ids, separated by commas." />
      ) : null}
      {platform.id !== 'api' ? (
        <TextField
          label="API base URL (optional)"
          value={d.apiBase}
          onValue={d.setApiBase}
          error={errors.api_base}
          hint={
            account && d.apiBase !== str(account.apiBase)
              ? 'A new address clears the stored secrets (they never go to another host): enter them again above.'
              : 'A private deployment of the platform; empty for the public API.'
          }
        />
      ) : null}
    </>
  );
}

function Bindings({ agents, platforms, why }: { agents: AgentListItem[]; platforms: Record<string, ChannelPlatformView> | undefined; why: string | null }) {
  const locked = { disabled: why !== null, title: why ?? undefined };
  const { notify } = useApp();
  const loaded = useLoad(() => api.get<{ bindings: Binding[] }>('/bindings'), [platforms]);
  const [rows, setRows] = useState<Binding[] | null>(null);
  const action = useAction();
  const list = rows ?? loaded.data?.bindings ?? [];
  const setRow = (i: number, b: Binding) => setRows(list.map((x, j) => (j === i ? b : x)));

  const save = async () => {
    const saved = await action.run(() => api.put<{ bindings: Binding[] }>('/bindings', { bindings: list }));
    if (saved) {
      loaded.set(saved);
      setRows(null);
      notify('Bindings saved');
    }
  };

  return (
    <section className="card" aria-labelledby="bindings-title">
      <div className="card-header">
        <h2 id="bindings-title">Bindings</h2>
        <button type="button" className="secondary" onClick={() => setRows([...list, { agentId: agents[0]?.ruleChain.id ?? '', match: { channel: 'chat_d' } }])} {...locked}>
          Add binding
        </button>
      </div>
      <p className="hint">The most specific binding wins: this account, then this platform, then the default.</p>
      <ErrorText error={loaded.error} />
      {list.length === 0 ? <p className="muted">No bindings.</p> : null}
      {list.map((b, i) => {
        const accounts = b.match.channel ? Object.keys(platforms?.[b.match.channel]?.accounts ?? {}) : [];
        return (
          <div key={i} className="binding-row">
            <SelectField
              label="Agent"
              value={b.agentId}
              onValue={(v) => setRow(i, { ...b, agentId: v })}
              options={[...(agents.some((a) => a.ruleChain.id === b.agentId) ? [] : [{ value: b.agentId, label: b.agentId || '(choose)' }]), ...agents.map((a) => ({ value: a.ruleChain.id, label: a.ruleChain.name || a.ruleChain.id }))]}
            />
            <SelectField
              label="Platform"
              value={b.match.default ? '*' : (b.match.channel ?? '')}
              onValue={(v) => setRow(i, { ...b, match: v === '*' ? { default: true } : { channel: v } })}
              options={[{ value: '*', label: 'any (default)' }, ...PLATFORMS.map((p) => ({ value: p.id, label: platformName(p.id) }))]}
            />
            <SelectField
              label="Account"
              value={b.match.accountId ?? ''}
              onValue={(v) => setRow(i, { ...b, match: { ...b.match, ...(v ? { accountId: v } : { accountId: undefined }) } })}
              options={[{ value: '', label: 'every account' }, ...accounts.map((a) => ({ value: a, label: a }))]}
              disabled={!b.match.channel}
            />
            <button type="button" className="link-button danger-text" onClick={() => setRows(list.filter((_, j) => j !== i))} {...locked}>
              Remove
            </button>
          </div>
        );
      })}
      <ErrorText error={action.error} />
      {rows ? (
        <div className="form-actions">
          <button type="button" onClick={() => void save()} disabled={action.busy}>
            Save bindings
          </button>
          <button type="button" className="secondary" onClick={() => setRows(null)}>
            Discard
          </button>
        </div>
      ) : null}
    </section>
  );
}
