import { useEffect, useState, type FormEvent, type ReactNode } from 'react';
import { api, setToken } from '../lib/api';
import { useAction, useLoad } from '../lib/hooks';
import { Link } from '../lib/router';
import type { ConfigView } from '@agentry/client';
import { CheckboxField, ErrorText, Loading, Notice, PageHeader, SelectField, TextArea, TextField } from '../components/ui';
import { useApp } from '../context';
import { adminOnlyReason } from '../lib/permissions';

export function SettingsPage() {
  const { status } = useApp();
  useEffect(() => {
    if (window.location.hash === '#account') document.getElementById('account')?.scrollIntoView();
  }, []);
  return (
    <div className="page narrow">
      <PageHeader title="Settings" />
      <ServerSettings />
      <AllowLists />
      <section id="account" className="card" aria-labelledby="account-title">
        <h2 id="account-title">Your account</h2>
        {status.user ? (
          <>
            <p>
              Signed in as <strong>{status.user.username}</strong> ({status.user.role}).
            </p>
            <PasswordForm />
            <ApiKey />
          </>
        ) : (
          <p>
            <Link to="/login?next=/settings%23account">Sign in</Link> to change your password or see your API key.
          </p>
        )}
      </section>
    </div>
  );
}

function ServerSettings() {
  const { notify, refresh, status } = useApp();
  const why = adminOnlyReason(status, 'the server configuration');
  const config = useLoad(() => api.get<ConfigView>('/config'), []);
  const [host, setHost] = useState('');
  const [port, setPort] = useState('');
  const [defaultProvider, setDefaultProvider] = useState('');
  const [requireAuth, setRequireAuth] = useState(false);
  const action = useAction();

  useEffect(() => {
    if (!config.data) return;
    setHost(config.data.server.host);
    setPort(String(config.data.server.port));
    setDefaultProvider(config.data.models.default_provider);
    setRequireAuth(config.data.security.requireAuth);
  }, [config.data]);

  const save = async (e: FormEvent) => {
    e.preventDefault();
    const c = config.data;
    if (!c) return;
    const patch: Record<string, Record<string, unknown>> = {};
    if (host !== c.server.host || Number(port) !== c.server.port) patch.server = { ...(host !== c.server.host ? { host } : {}), ...(Number(port) !== c.server.port ? { port: Number(port) } : {}) };
    if (defaultProvider !== c.models.default_provider) patch.models = { default_provider: defaultProvider };
    if (requireAuth !== c.security.requireAuth) patch.security = { requireAuth };
    if (Object.keys(patch).length === 0) return notify('Nothing changed');
    const saved = await action.run(() => api.put<ConfigView>('/config', patch));
    if (saved) {
      config.set(saved);
      notify('Configuration saved');
      if (patch.security) await refresh();
    }
  };

  if (config.error) return <ErrorText error={config.error} />;
  if (!config.data) return <Loading />;
  const c = config.data;
  return (
    <form className="form card" onSubmit={(e) => void save(e)} aria-labelledby="server-title">
      <h2 id="server-title">Server configuration</h2>
      <p className="hint">Stored in the database and applied on every replica; host and port take effect at the next start.</p>
      <div className="grid-2">
        <TextField label="Listen host" value={host} onValue={setHost} />
        <TextField label="Listen port" value={port} onValue={setPort} inputMode="numeric" />
      </div>
      <SelectField
        label="Default model provider"
        value={defaultProvider}
        onValue={setDefaultProvider}
        options={[{ value: '', label: 'None' }, ...Object.keys(c.models.providers).map((p) => ({ value: p, label: p }))]}
      />
      <CheckboxField
        label="Require a login for management"
        checked={requireAuth}
        onChecked={setRequireAuth}
        hint="When on, every management request needs a JWT; only admin may change configuration, providers, channels and global skills."
      />
      {requireAuth && !c.security.requireAuth ? <Notice kind="warn">Change the admin password first if it is still the default one.</Notice> : null}
      <dl className="facts">
        <dt>Data directory</dt>
        <dd>
          <code>{c.data.root_dir}</code>
        </dd>
        <dt>Logs</dt>
        <dd>
          <code>{c.data.logs_dir}</code>
        </dd>
        <dt>Users</dt>
        <dd>{Object.keys(c.security.users).join(', ') || '—'}</dd>
      </dl>
      <ErrorText error={action.error} />
      <div className="form-actions">
        <SaveButton busy={action.busy} why={why}>
          Save configuration
        </SaveButton>
      </div>
    </form>
  );
}

/**
 * A form's submit button, disabled with the reason beside it when the viewer may not save
 * (PUT /config is an admin route: a user reads the settings and is told why it cannot save them).
 */
function SaveButton({ busy, why, children }: { busy: boolean; why: string | null; children: ReactNode }) {
  return (
    <>
      <button type="submit" disabled={busy || why !== null} title={why ?? undefined}>
        {children}
      </button>
      {why ? <span className="muted">{why}</span> : null}
    </>
  );
}

/** Entries as typed: one per line (commas and spaces separate too). */
const entries = (text: string) => text.split(/[\s,]+/).filter(Boolean);

/** security.allowFrom: the server checks the entries and refuses a list that would lock this browser out. */
function AllowLists() {
  const { notify, status } = useApp();
  const why = adminOnlyReason(status, 'the allow-lists');
  const config = useLoad(() => api.get<ConfigView>('/config'), []);
  const [management, setManagement] = useState('');
  const [chat, setChat] = useState('');
  const action = useAction();

  useEffect(() => {
    if (!config.data) return;
    setManagement(config.data.security.allowFrom.management.join('\n'));
    setChat(config.data.security.allowFrom.chat.join('\n'));
  }, [config.data]);

  const save = async (e: FormEvent) => {
    e.preventDefault();
    const saved = await action.run(() => api.put<ConfigView>('/config', { security: { allowFrom: { management: entries(management), chat: entries(chat) } } }));
    if (saved) {
      config.set(saved);
      notify('Address allow-lists saved');
    }
  };

  if (config.error) return <ErrorText error={config.error} />;
  if (!config.data) return <Loading />;
  return (
    <form className="form card" onSubmit={(e) => void save(e)} aria-labelledby="allow-title">
      <h2 id="allow-title">Address allow-lists</h2>
      <p className="hint">CIDRs or addresses, one per line (10.0.0.0/8, 2001:db8::/32, 203.0.113.7). An empty list lets every address in.</p>
      <TextArea
        label="Management addresses"
        value={management}
        onValue={setManagement}
        rows={3}
        spellCheck={false}
        hint="Every route but chat, the probes, the web UI's files and platform webhooks; sign-in included."
      />
      <TextArea label="Chat addresses" value={chat} onValue={setChat} rows={3} spellCheck={false} hint="/chat/completions, /responses and /models." />
      <ErrorText error={action.error} />
      <div className="form-actions">
        <SaveButton busy={action.busy} why={why}>
          Save allow-lists
        </SaveButton>
      </div>
    </form>
  );
}

function PasswordForm() {
  const { notify, refresh } = useApp();
  const [oldPassword, setOld] = useState('');
  const [newPassword, setNew] = useState('');
  const [repeat, setRepeat] = useState('');
  const action = useAction();
  const mismatch = repeat && newPassword !== repeat ? 'the two new passwords differ' : null;

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (mismatch) return;
    const answer = await action.run(() => api.put<{ token: string; expireAt: string }>('/auth/password', { oldPassword, newPassword }));
    if (answer) {
      // Older tokens are revoked; the answer carries a fresh one.
      setToken({ token: answer.token, expireAt: answer.expireAt });
      setOld('');
      setNew('');
      setRepeat('');
      notify('Password changed');
      await refresh();
    }
  };

  return (
    <form className="form" onSubmit={(e) => void submit(e)} aria-label="Change password">
      <h3>Change password</h3>
      <TextField label="Current password" type="password" autoComplete="current-password" value={oldPassword} onValue={setOld} required />
      <TextField label="New password" type="password" autoComplete="new-password" value={newPassword} onValue={setNew} required />
      <TextField label="New password again" type="password" autoComplete="new-password" value={repeat} onValue={setRepeat} required error={mismatch} />
      <ErrorText error={action.error} />
      <div className="form-actions">
        <button type="submit" disabled={action.busy}>
          Change password
        </button>
      </div>
    </form>
  );
}

function ApiKey() {
  const [key, setKey] = useState<string | null | undefined>(undefined);
  const action = useAction();
  const show = async () => {
    const answer = await action.run(() => api.get<{ apiKey: string | null }>('/auth/api-key'));
    if (answer) setKey(answer.apiKey);
  };
  const regenerate = async () => {
    if (!window.confirm('Make a new API key? The old one stops working at once.')) return;
    const answer = await action.run(() => api.post<{ apiKey: string }>('/auth/api-key'));
    if (answer) setKey(answer.apiKey);
  };
  return (
    <div className="form">
      <h3>Your API key</h3>
      <p className="hint">For chat completions from OpenAI clients: base URL {window.location.origin}/api/v1.</p>
      {key !== undefined ? <p>{key ? <code className="secret-once">{key}</code> : 'You have no API key yet.'}</p> : null}
      <ErrorText error={action.error} />
      <div className="form-actions">
        <button type="button" className="secondary" onClick={() => void show()} disabled={action.busy}>
          Show
        </button>
        <button type="button" className="secondary" onClick={() => void regenerate()} disabled={action.busy}>
          {key ? 'Regenerate' : 'Create'}
        </button>
      </div>
    </div>
  );
}
