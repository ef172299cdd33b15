import { getRuleChain, type RuleChainRow } from '@agentry/db';
import { parseChain, timeOf, holdsSecrets, unsealDefinition } from '@agentry/definitions';
import type { RunDeps } from './deps.js';

/**
 * A stored chain with its secrets opened, for this run only: rows, caches and job payloads keep
 * them sealed, so the plain text lives no longer than the run that sends it.
 */
function opened(deps: Pick<RunDeps, 'secrets'>, row: RuleChainRow): RuleChainRow {
  return { ...row, dsl: unsealDefinition(row.dsl, deps.secrets, `${row.kind === 'agent' ? 'agent' : 'rule chain'} "${row.id}"`) };
}

/** An agent's row with its secrets opened (undefined when it does not exist); `secrets`: the stored row holds credentials. */
export async function readAgent(deps: Pick<RunDeps, 'agent' | 'secrets'>, agentId: string): Promise<(RuleChainRow & { secrets: boolean }) | undefined> {
  const row = await deps.agent(agentId);
  return row && { ...opened(deps, row), secrets: holdsSecrets(row.dsl) };
}

/** Loads a stored chain for the runner (undefined when it does not exist). */
export async function loadChain(deps: Pick<RunDeps, 'db' | 'secrets'>, id: string) {
  const row = await getRuleChain(deps.db, id);
  if (!row) return undefined;
  const { dsl } = opened(deps, row);
  const parsed = parseChain({ id: row.id, dsl, isAgent: row.kind === 'agent' });
  return parsed.ok ? { ok: true as const, chain: { ...parsed.chain, owner: row.owner, secrets: holdsSecrets(row.dsl), ...times(row) } } : parsed;
}

/** The row's creation and last save as ms, where they read as times. */
function times(row: RuleChainRow): { createdAt?: number; savedAt?: number } {
  const createdAt = timeOf(row.createdAt);
  const savedAt = timeOf(row.updatedAt);
  return { ...(createdAt === undefined ? {} : { createdAt }), ...(savedAt === undefined ? {} : { savedAt }) };
}
