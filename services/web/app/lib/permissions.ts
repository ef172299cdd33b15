import type { AuthStatus } from '@agentry/client';

/**
 * What the signed-in viewer may change, as the gateway decides it (`auth/ownership.ts`): admins
 * (and anyone while no login is required) everything; a user what it owns. Each answer is null
 * (allowed) or the reason shown next to the disabled control. Pure.
 */

type Viewer = Pick<AuthStatus, 'requireAuth' | 'user'>;

export function isAdminViewer(v: Viewer): boolean {
  return !v.requireAuth || v.user?.role === 'admin';
}

/** Why the viewer may not change a row owned by `owner` (an agent, a cron job), or null. */
export function notOwnerReason(v: Viewer, owner: string | undefined, noun: string): string | null {
  if (isAdminViewer(v) || owner === undefined || v.user?.username === owner) return null;
  return `Only ${owner} (its owner) or an admin may change this ${noun}.`;
}

/** Why the viewer may not change server-wide settings (providers, configuration), or null. */
export function adminOnlyReason(v: Viewer, what: string): string | null {
  return isAdminViewer(v) ? null : `Only an admin may change ${what}.`;
}

/**
 * Whether chat on this open server still takes no key, as the gateway decides it (its credential
 * index: `anyKeyConfigured`): no API key exists (the server's `chatNeedsKey`, which counts users'
 * own keys and enabled accounts of the enabled `api` platform) and no enabled account in `accounts`
 * (the page's list, fresher than the server's reloaded index). A disabled platform's accounts
 * lock nothing. True: the first enabled API account would make chat key-only, the page warns.
 */
export function chatStillOpen(status: { requireAuth: boolean; chatNeedsKey?: boolean }, view: { enabled: boolean } | undefined, accounts: ReadonlyArray<{ enabled: boolean }>): boolean {
  if (status.requireAuth || status.chatNeedsKey !== false) return false;
  if (view && !view.enabled) return false;
  return !accounts.some((a) => a.enabled);
}
