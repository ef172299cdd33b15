import { Fragment, useState, type FormEvent } from 'react';
import { api } from '../lib/api';
import { useAction, useLoad, type Loaded } from '../lib/hooks';
import type { User } from '@agentry/client';
import { ErrorText, Loading, Notice, PageHeader, SelectField, TextField, fmtTime } from '../components/ui';
import { useApp } from '../context';

const ROLES = [
  { value: 'user', label: 'user' },
  { value: 'admin', label: 'admin' },
];
const MIN_PASSWORD = 8;
const userPath = (u: User) => `/users/${encodeURIComponent(u.username)}`;

/** Whether the signed-in caller may manage users: an admin, or anyone while the gateway needs no login. */
export function canManageUsers(status: { requireAuth: boolean; user: { role: string } | null }): boolean {
  return !status.requireAuth || status.user?.role === 'admin';
}

export function UsersPage() {
  const { status } = useApp();
  if (!canManageUsers(status)) {
    return (
      <div className="page">
        <PageHeader title="Users" />
        <Notice>Only an admin manages users.</Notice>
      </div>
    );
  }
  return <UserAdmin />;
}

function UserAdmin() {
  const { notify } = useApp();
  const users = useLoad(async () => (await api.get<{ users: User[] }>('/users')).users, []);
  const [creating, setCreating] = useState(false);
  return (
    <div className="page">
      <PageHeader title="Users">
        <button type="button" className="secondary" onClick={users.reload}>
          Refresh
        </button>
        <button type="button" onClick={() => setCreating((c) => !c)} aria-expanded={creating}>
          New user
        </button>
      </PageHeader>
      <p className="muted">
        Admins do everything; users chat and write agents, but not configuration, providers, channels or users. Users from{' '}
        <code>security.users</code> in the configuration file are deleted there.
      </p>
      {creating ? (
        <NewUserForm
          onCancel={() => setCreating(false)}
          onCreated={(user) => {
            setCreating(false);
            users.set([...(users.data ?? []), user].sort((a, b) => a.username.localeCompare(b.username)));
            notify(`User ${user.username} created`);
          }}
        />
      ) : null}
      <ErrorText error={users.error} />
      {users.data ? <UserTable users={users} /> : <Loading />}
    </div>
  );
}

function UserTable({ users }: { users: Loaded<User[]> }) {
  const [resetting, setResetting] = useState<string | null>(null);
  const action = useAction();
  const replace = (updated: User) => users.set((users.data ?? []).map((u) => (u.username === updated.username ? updated : u)));
  return (
    <>
      <ErrorText error={action.error} />
      <div className="table-wrap">
        <table className="users-table">
          <thead>
            <tr>
              <th scope="col">Enabled</th>
              <th scope="col">Username</th>
              <th scope="col">Role</th>
              <th scope="col">API key</th>
              <th scope="col">Source</th>
              <th scope="col">Created</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {(users.data ?? []).map((user) => (
              <Fragment key={user.username}>
                <UserRow
                  user={user}
                  action={action}
                  onChanged={replace}
                  onDeleted={users.reload}
                  resetOpen={resetting === user.username}
                  onToggleReset={() => setResetting((r) => (r === user.username ? null : user.username))}
                />
                {resetting === user.username ? (
                  <tr>
                    <td colSpan={7}>
                      <PasswordReset
                        user={user}
                        onDone={(u) => {
                          setResetting(null);
                          replace(u);
                        }}
                      />
                    </td>
                  </tr>
                ) : null}
              </Fragment>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

interface RowProps {
  user: User;
  action: ReturnType<typeof useAction>;
  onChanged: (u: User) => void;
  onDeleted: () => void;
  resetOpen: boolean;
  onToggleReset: () => void;
}

function UserRow({ user, action, onChanged, onDeleted, resetOpen, onToggleReset }: RowProps) {
  const { notify } = useApp();
  const change = async (body: Partial<Pick<User, 'role' | 'disabled'>>, done: string) => {
    const updated = await action.run(() => api.put<User>(userPath(user), body));
    if (updated) {
      onChanged(updated);
      notify(`${user.username} ${done}`);
    }
  };
  const remove = async () => {
    if (!window.confirm(`Delete user "${user.username}"? Its logins and API key stop working at once.`)) return;
    if (await action.run(() => api.delete(userPath(user)))) {
      onDeleted();
      notify(`${user.username} deleted`);
    }
  };
  return (
    <tr data-user={user.username}>
      <td>
        <label className="switch">
          <input
            type="checkbox"
            checked={!user.disabled}
            disabled={action.busy}
            onChange={() => void change({ disabled: !user.disabled }, user.disabled ? 'enabled' : 'disabled')}
          />
          <span className="sr-only">Enable {user.username}</span>
        </label>
      </td>
      <td>{user.username}</td>
      <td>
        <select aria-label={`Role of ${user.username}`} value={user.role} disabled={action.busy} onChange={(e) => void change({ role: e.target.value as User['role'] }, `is now ${e.target.value}`)}>
          {ROLES.map((r) => (
            <option key={r.value} value={r.value}>
              {r.label}
            </option>
          ))}
        </select>
      </td>
      <td>{user.hasApiKey ? 'yes' : 'no'}</td>
      <td>{user.source === 'file' ? <span title="from security.users in the configuration file">file</span> : 'created here'}</td>
      <td>{fmtTime(user.createdAt)}</td>
      <td className="actions-cell">
        <div className="row-actions">
          <button type="button" className="link-button" aria-expanded={resetOpen} onClick={onToggleReset}>
            Reset password
          </button>
          {user.source === 'api' ? (
            <button type="button" className="link-button danger-text" onClick={() => void remove()}>
              Delete
            </button>
          ) : null}
        </div>
      </td>
    </tr>
  );
}

function PasswordReset({ user, onDone }: { user: User; onDone: (u: User) => void }) {
  const { notify } = useApp();
  const [password, setPassword] = useState('');
  const action = useAction();
  const short = password.length > 0 && password.length < MIN_PASSWORD;
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const updated = await action.run(() => api.put<User>(userPath(user), { password }));
    if (updated) {
      notify(`Password of ${user.username} set; its earlier logins stop working`);
      onDone(updated);
    }
  };
  return (
    <form className="form inline-form" onSubmit={(e) => void submit(e)} aria-label={`New password for ${user.username}`}>
      <TextField
        label={`New password for ${user.username}`}
        type="password"
        autoComplete="new-password"
        value={password}
        onValue={setPassword}
        required
        autoFocus
        error={short ? `at least ${MIN_PASSWORD} characters` : null}
      />
      <ErrorText error={action.error} />
      <div className="form-actions">
        <button type="submit" disabled={action.busy || password.length < MIN_PASSWORD}>
          {action.busy ? 'Setting…' : 'Set password'}
        </button>
      </div>
    </form>
  );
}

function NewUserForm({ onCreated, onCancel }: { onCreated: (u: User) => void; onCancel: () => void }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [role, setRole] = useState('user');
  const action = useAction();
  const short = password.length > 0 && password.length < MIN_PASSWORD;
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const user = await action.run(() => api.post<User>('/users', { username: username.trim(), password, role }));
    if (user) onCreated(user);
  };
  return (
    <form className="form card" onSubmit={(e) => void submit(e)} aria-label="New user">
      <div className="grid-2">
        <TextField label="Username" value={username} onValue={setUsername} required autoFocus autoComplete="off" spellCheck={false} hint="Letters, digits, ., _ and -." />
        <SelectField label="Role" value={role} onValue={setRole} options={ROLES} />
      </div>
      <TextField
        label="Password"
        type="password"
        autoComplete="new-password"
        value={password}
        onValue={setPassword}
        required
        error={short ? `at least ${MIN_PASSWORD} characters` : null}
      />
      <ErrorText error={action.error} />
      <div className="form-actions">
        <button type="submit" disabled={action.busy}>
          {action.busy ? 'Creating…' : 'Create user'}
        </button>
        <button type="button" className="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
