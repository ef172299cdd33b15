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
