import { createContext, useContext } from 'react';
import type { AuthStatus } from '@agentry/client';

export interface AppState {
  status: AuthStatus;
  /** Asks the gateway again who is logged in (after a login, logout or password change). */
  refresh: () => Promise<void>;
  logout: () => void;
  /** A short message in the corner (status, polite). */
  notify: (text: string, kind?: 'ok' | 'error') => void;
}

export const AppContext = createContext<AppState | null>(null);

export function useApp(): AppState {
  const ctx = useContext(AppContext);
  if (!ctx) throw new Error('useApp outside the app');
  return ctx;
}
