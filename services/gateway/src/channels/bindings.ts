import { Errors } from '@agentry/errors';
import { PLATFORMS, type BindingList, type BindingMatchInput } from '@agentry/contracts';
import { getRuleChain, listBindings, listChannelAccounts, type BindingRecord, type Db } from '@agentry/db';

/** Bindings (spec "Binding"): how they read, how a written one is checked before it is stored. */

/** Bindings as read: `match.default` always shown, false unless it is the default binding. */
export async function bindingsView(db: Db): Promise<BindingList> {
  return { bindings: (await listBindings(db)).map((b) => ({ agentId: b.agentId, match: { ...b.match, default: b.match.default === true } })) };
}

/** A written match with the file spelling `account_id` folded into `accountId`. */
export function writtenMatch(m: BindingMatchInput, where: string): BindingRecord['match'] {
  const { account_id: fileSpelling, ...match } = m;
  if (fileSpelling !== undefined && match.accountId !== undefined && fileSpelling !== match.accountId) {
    throw new Errors.VALIDATION(`${where}.match: accountId and account_id disagree ("${match.accountId}" and "${fileSpelling}"); send accountId alone`);
  }
  return dropUndefined({ ...match, accountId: match.accountId ?? fileSpelling });
}

/** `platform/id` of every account, read once per request for the binding checks. */
export async function accountKeys(db: Db): Promise<Set<string>> {
  return new Set((await listChannelAccounts(db)).map((a) => `${a.platform}/${a.id}`));
}

/** A binding's agent exists, its channel is a platform, its account is among `accounts`. */
export async function checkBinding(db: Db, b: BindingRecord, accounts: ReadonlySet<string>, where = 'binding'): Promise<void> {
  const agent = await getRuleChain(db, b.agentId);
  if (!agent || agent.kind !== 'agent') throw new Errors.VALIDATION(`${where}.agentId: no agent "${b.agentId}"`);
  const { channel, accountId } = b.match;
  if (channel === undefined && accountId === undefined && b.match.default !== true) {
    throw new Errors.VALIDATION(`${where}.match: give channel (and optionally accountId), or default: true`);
  }
  if (accountId !== undefined && channel === undefined) throw new Errors.VALIDATION(`${where}.match.accountId needs match.channel`);
  if (channel !== undefined) {
    if (!(PLATFORMS as readonly string[]).includes(channel)) throw new Errors.VALIDATION(`${where}.match.channel: "${channel}" is not a platform (one of ${PLATFORMS.join(', ')})`);
    if (accountId !== undefined && !accounts.has(`${channel}/${accountId}`)) throw new Errors.VALIDATION(`${where}.match.accountId: no ${channel} account "${accountId}"`);
  }
}

function dropUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
