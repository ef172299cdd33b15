import { useState, type FormEvent } from 'react';
import { login, messageOf } from '../lib/api';
import { navigate } from '../lib/router';
import { useApp } from '../context';
import { ErrorText, TextField } from '../components/ui';

/** Username and password -> JWT (kept in memory and this tab's sessionStorage). */
export function LoginPage({ next }: { next: string }) {
  const { status, refresh } = useApp();
  const [username, setUsername] = useState('admin');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // Only paths of this app: never an absolute URL to somewhere else.
  const target = next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/login') ? next : '/chat';

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await login(username, password);
      await refresh();
      navigate(target, { replace: true });
    } catch (err) {
      setError(messageOf(err));
      setBusy(false);
    }
  };

  return (
    <main className="login-page" id="main">
      <form className="login-card" onSubmit={(e) => void submit(e)} aria-labelledby="login-title">
        <h1 id="login-title">Agentry</h1>
        <p className="muted">{status.requireAuth ? 'Sign in to manage agents and chat with them.' : 'Sign in (optional: this server does not require it).'}</p>
        <TextField label="Username" value={username} onValue={setUsername} autoComplete="username" required autoFocus />
        <TextField label="Password" type="password" value={password} onValue={setPassword} autoComplete="current-password" required />
        <ErrorText error={error} />
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        {!status.requireAuth ? (
          <button type="button" className="link-button" onClick={() => navigate(target)}>
            Continue without signing in
          </button>
        ) : null}
      </form>
    </main>
  );
}
