import { useCallback, useEffect, useMemo, useRef, useState, type ReactNode } from 'react';
import { client, messageOf, setToken, setUnauthorizedHandler } from './lib/api';
import { Link, matchPath, navigate, useLocation } from './lib/router';
import type { AuthStatus } from '@agentry/client';
import { AppContext, type AppState } from './context';
import { LoginPage } from './pages/Login';
import { ChatPage } from './pages/Chat';
import { AgentsPage, AgentNewPage } from './pages/Agents';
import { AgentEditPage } from './pages/AgentEdit';
import { SkillsPage } from './pages/Skills';
import { WorkspacePage } from './pages/Workspace';
import { CronPage } from './pages/Cron';
import { ChannelsPage } from './pages/Channels';
import { ProvidersPage } from './pages/Providers';
import { SettingsPage } from './pages/Settings';
import { UsersPage, canManageUsers } from './pages/Users';
import { UsagePage } from './pages/Usage';

/** `admin`: shown only to whoever may use it (the page itself says so to anyone else). */
const NAV: Array<{ to: string; label: string; admin?: boolean }> = [
  { to: '/chat', label: 'Chat' },
  { to: '/agents', label: 'Agents' },
  { to: '/skills', label: 'Skills' },
  { to: '/workspace', label: 'Workspace' },
  { to: '/cron', label: 'Cron jobs' },
  { to: '/channels', label: 'Channels' },
  { to: '/providers', label: 'Model providers' },
  { to: '/usage', label: 'Usage' },
  { to: '/users', label: 'Users', admin: true },
  { to: '/settings', label: 'Settings' },
];

function route(path: string): { title: string; page: ReactNode } {
  let p: Record<string, string> | null;
  // The login form is drawn by App itself; its tab still needs a title.
  if (matchPath('/login', path)) return { title: 'Log in', page: null };
  if ((p = matchPath('/chat', path))) return { title: 'Chat', page: <ChatPage /> };
  if ((p = matchPath('/chat/:agentId', path))) return { title: 'Chat', page: <ChatPage agentId={p.agentId} /> };
  if ((p = matchPath('/chat/:agentId/:sessionKey', path))) return { title: 'Chat', page: <ChatPage agentId={p.agentId} sessionKey={p.sessionKey} /> };
  if (matchPath('/agents', path)) return { title: 'Agents', page: <AgentsPage /> };
  if (matchPath('/agents/new', path)) return { title: 'New agent', page: <AgentNewPage /> };
  if ((p = matchPath('/agents/:agentId', path))) return { title: `Agent ${p.agentId}`, page: <AgentEditPage key={p.agentId} agentId={p.agentId!} /> };
  if (matchPath('/skills', path)) return { title: 'Skills', page: <SkillsPage /> };
  if (matchPath('/workspace', path)) return { title: 'Workspace', page: <WorkspacePage /> };
  if ((p = matchPath('/workspace/:agentId', path))) return { title: 'Workspace', page: <WorkspacePage key={p.agentId} agentId={p.agentId} /> };
  if (matchPath('/cron', path)) return { title: 'Cron jobs', page: <CronPage /> };
  if (matchPath('/channels', path)) return { title: 'Channels', page: <ChannelsPage /> };
  if (matchPath('/providers', path)) return { title: 'Model providers', page: <ProvidersPage /> };
  if (matchPath('/users', path)) return { title: 'Users', page: <UsersPage /> };
  if (matchPath('/usage', path)) return { title: 'Usage', page: <UsagePage /> };
  if (matchPath('/settings', path)) return { title: 'Settings', page: <SettingsPage /> };
  return {
    title: 'Not found',
    page: (
      <div className="page">
        <h1>Not found</h1>
        <p>
          Nothing lives at <code>{path}</code>. <Link to="/chat">Go to the chat</Link>.
        </p>
      </div>
    ),
  };
}

/** Who is logged in (the gateway's answer), and what a 401 anywhere does: back to the login. */
function useAuthStatus() {
  const [status, setStatus] = useState<AuthStatus | null>(null);
  const [bootError, setBootError] = useState<string | null>(null);

  const refresh = useCallback(async () => {
    try {
      const s = await client.auth.status();
      // A stored token the gateway no longer accepts is dropped.
      if (!s.user) setToken(null);
      setStatus(s);
      setBootError(null);
    } catch (err) {
      setBootError(messageOf(err));
    }
  }, []);

  useEffect(() => {
    void refresh();
  }, [refresh]);

  useEffect(() => {
    setUnauthorizedHandler(() => {
      setStatus((s) => (s ? { requireAuth: s.requireAuth, user: null } : s));
      const here = window.location.pathname + window.location.search;
      if (!here.startsWith('/login')) navigate(`/login?next=${encodeURIComponent(here)}`, { replace: true, force: true });
    });
    return () => setUnauthorizedHandler(null);
  }, []);

  const logout = useCallback(() => {
    setToken(null);
    setStatus((s) => (s ? { requireAuth: s.requireAuth, user: null } : s));
    navigate(status?.requireAuth ? '/login' : '/chat');
  }, [status?.requireAuth]);

  return { status, bootError, refresh, logout };
}

type Toast = { id: number; text: string; kind: 'ok' | 'error' };

function useToasts() {
  const [toasts, setToasts] = useState<Toast[]>([]);
  const toastId = useRef(0);
  const notify = useCallback((text: string, kind: 'ok' | 'error' = 'ok') => {
    const id = ++toastId.current;
    setToasts((t) => [...t, { id, text, kind }]);
    setTimeout(() => setToasts((t) => t.filter((x) => x.id !== id)), 4000);
  }, []);
  return { toasts, notify };
}

export function App() {
  const { path, query } = useLocation();
  const [menuOpen, setMenuOpen] = useState(false);
  const { status, bootError, refresh, logout } = useAuthStatus();
  const { toasts, notify } = useToasts();

  const state = useMemo<AppState | null>(() => (status ? { status, refresh, logout, notify } : null), [status, refresh, logout, notify]);

  const mustLogin = status !== null && status.requireAuth && !status.user && path !== '/login';
  useEffect(() => {
    if (mustLogin) navigate(`/login?next=${encodeURIComponent(path + (query.toString() ? `?${query.toString()}` : ''))}`, { replace: true, force: true });
  }, [mustLogin, path, query]);
  useEffect(() => {
    if (path === '/') navigate('/chat', { replace: true });
  }, [path]);

  const current = route(path);
  useEffect(() => {
    document.title = `${current.title} · Agentry`;
    setMenuOpen(false);
  }, [current.title, path]);

  if (!state) return <BootScreen error={bootError} onRetry={() => void refresh()} />;

  if (path === '/login') {
    return (
      <AppContext.Provider value={state}>
        <LoginPage next={query.get('next') ?? '/chat'} />
      </AppContext.Provider>
    );
  }
  if (mustLogin) return null;
  const { status: auth } = state;

  return (
    <AppContext.Provider value={state}>
      <div className={`app${menuOpen ? ' menu-open' : ''}`}>
        <a className="skip-link" href="#main">
          Skip to content
        </a>
        <Topbar auth={auth} path={path} menuOpen={menuOpen} onMenu={() => setMenuOpen((o) => !o)} onLogout={logout} />
        {auth.defaultPassword ? (
          <div className="banner" role="alert">
            The <strong>admin</strong> user still has the default password.{' '}
            {/* Changing a password needs a login (of admin, with that default password) even on an open server. */}
            <Link to={auth.user ? '/settings#account' : `/login?next=${encodeURIComponent('/settings#account')}`}>Change it now</Link>.
          </div>
        ) : null}
        <div className="shell">
          <nav id="main-nav" className="sidebar" aria-label="Main">
            <ul>
              {NAV.filter((n) => !n.admin || canManageUsers(auth)).map((n) => (
                <li key={n.to}>
                  <Link to={n.to} aria-current={path === n.to || path.startsWith(`${n.to}/`) ? 'page' : undefined}>
                    {n.label}
                  </Link>
                </li>
              ))}
            </ul>
          </nav>
          <main id="main" tabIndex={-1}>
            {current.page}
          </main>
        </div>
        <div className="toasts" aria-live="polite">
          {toasts.map((t) => (
            <div key={t.id} className={`toast toast-${t.kind}`}>
              {t.text}
            </div>
          ))}
        </div>
      </div>
    </AppContext.Provider>
  );
}

/** Before the gateway has said who is logged in: waiting, or why it did not answer. */
function BootScreen({ error, onRetry }: { error: string | null; onRetry: () => void }) {
  return (
    <div className="boot">
      {error ? (
        <div className="notice notice-error" role="alert">
          The gateway did not answer: {error}.{' '}
          <button type="button" onClick={onRetry}>
            Try again
          </button>
        </div>
      ) : (
        <p role="status">Loading…</p>
      )}
    </div>
  );
}

function Topbar({ auth, path, menuOpen, onMenu, onLogout }: { auth: AuthStatus; path: string; menuOpen: boolean; onMenu: () => void; onLogout: () => void }) {
  return (
    <header className="topbar">
      <button type="button" className="menu-button" aria-expanded={menuOpen} aria-controls="main-nav" onClick={onMenu}>
        <span aria-hidden="true">☰</span>
        <span className="sr-only">Menu</span>
      </button>
      <Link to="/chat" className="brand">
        Agentry
      </Link>
      <div className="topbar-right">
        {auth.user ? (
          <>
            <span className="user" aria-label="Signed in as">
              {auth.user.username}
            </span>
            <button type="button" className="secondary" onClick={onLogout}>
              Log out
            </button>
          </>
        ) : !auth.requireAuth ? (
          // Nobody needs to log in here: a "Log in" button would suggest the visitor lacks a power they already have.
          <Link
            to={`/login?next=${encodeURIComponent(path)}`}
            className="open-server"
            title="This server does not require a login (security.requireAuth is false): anyone who can reach it manages agents. Log in to act as your own user."
          >
            open server
          </Link>
        ) : (
          <Link to={`/login?next=${encodeURIComponent(path)}`} className="button secondary">
            Log in
          </Link>
        )}
      </div>
    </header>
  );
}
