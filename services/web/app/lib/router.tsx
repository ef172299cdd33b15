import { useEffect, useRef, useSyncExternalStore, type AnchorHTMLAttributes, type MouseEvent } from 'react';

/** A tiny history-API router: the gateway answers index.html for every client-side path. */

const listeners = new Set<() => void>();
const notify = () => listeners.forEach((l) => l());

/** Pages that ask before they are left (unsaved edits): each answers the question to ask, or null. */
const guards = new Set<() => string | null>();
/** True when no guard objects, or the user confirmed leaving. */
function mayLeave(): boolean {
  for (const g of guards) {
    const question = g();
    if (question !== null && !window.confirm(question)) return false;
  }
  return true;
}
// Where the app was before the browser's Back or Forward: put back when the user stays.
let shown = window.location.pathname + window.location.search;
window.addEventListener('popstate', () => {
  const to = window.location.pathname + window.location.search;
  if (to !== shown && !mayLeave()) {
    window.history.pushState(null, '', shown);
    return;
  }
  shown = to;
  notify();
});

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

const snapshot = () => window.location.pathname + window.location.search;

/** The current path and query, re-rendering on every navigation. */
export function useLocation(): { path: string; query: URLSearchParams } {
  const loc = useSyncExternalStore(subscribe, snapshot);
  const [path, search] = loc.split('?');
  return { path: path || '/', query: new URLSearchParams(search ?? '') };
}

export function navigate(to: string, opts: { replace?: boolean; force?: boolean } = {}): void {
  if (to === snapshot()) return;
  if (!opts.force && !mayLeave()) return;
  if (opts.replace) window.history.replaceState(null, '', to);
  else window.history.pushState(null, '', to);
  shown = snapshot();
  notify();
}

/**
 * While `question` is not null, leaving the page asks it first: a link or `navigate` (route
 * change), Back and Forward, and a reload or closed tab (the browser's own beforeunload prompt).
 */
export function useLeaveGuard(question: string | null): void {
  const latest = useRef(question);
  latest.current = question;
  useEffect(() => {
    const guard = () => latest.current;
    const beforeUnload = (e: BeforeUnloadEvent) => {
      if (latest.current === null) return;
      e.preventDefault();
      // Older browsers show the prompt only when returnValue is set.
      e.returnValue = latest.current;
    };
    guards.add(guard);
    window.addEventListener('beforeunload', beforeUnload);
    return () => {
      guards.delete(guard);
      window.removeEventListener('beforeunload', beforeUnload);
    };
  }, []);
}

/** Named parameters of `pattern` (`/agents/:id`) in `path`, or null when it does not match. */
export function matchPath(pattern: string, path: string): Record<string, string> | null {
  const want = pattern.split('/').filter(Boolean);
  const have = path.split('/').filter(Boolean);
  if (want.length !== have.length) return null;
  const params: Record<string, string> = {};
  for (const [i, w] of want.entries()) {
    const h = have[i]!;
    if (w.startsWith(':')) params[w.slice(1)] = decodeURIComponent(h);
    else if (w !== h) return null;
  }
  return params;
}

export function Link({ to, onClick, ...rest }: AnchorHTMLAttributes<HTMLAnchorElement> & { to: string }) {
  const click = (e: MouseEvent<HTMLAnchorElement>) => {
    onClick?.(e);
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(to);
  };
  return <a href={to} onClick={click} {...rest} />;
}
