import pino from 'pino';
import type { RunEvent } from '@agentry/contracts';
import { getRuleChain, listSkills, type Db, type FinalRunStatus } from '@agentry/db';
import { ownerIsAdmin } from '@agentry/definitions';
import { ChainRunner, type ModelCallRequest, type ModelEvent, type RunDeps } from '../src/index.js';

/** What the fakes of `fakeRunDeps` saw, for assertions. */
export interface RunDepsRecord {
  events: RunEvent[];
  calls: ModelCallRequest[];
  ended: Array<{ status: FinalRunStatus; source: string }>;
  replies: Array<{ runId: string; text: string }>;
  delivered: number;
}

/** A model that answers every call with `ok`. */
async function* answersOk(): AsyncIterable<ModelEvent> {
  yield { type: 'text', text: 'ok' };
  yield { type: 'done', finishReason: 'stop', provider: 'p', model: 'm' };
}

/**
 * `RunDeps` for a test: the database is the test's, every hook a fake that records what it was
 * asked (`record`), nothing leaves the process. Scripts refuse to run (no sandbox threads); a
 * test that needs them passes `chains`.
 */
export function fakeRunDeps(db: Db, overrides: Partial<RunDeps> = {}): { deps: RunDeps; record: RunDepsRecord } {
  const record: RunDepsRecord = { events: [], calls: [], ended: [], replies: [], delivered: 0 };
  const stream = overrides.stream ?? answersOk;
  const deps: RunDeps = {
    db,
    logger: pino({ level: 'silent' }),
    publish: async (event) => void record.events.push(event),
    agent: (agentId) => getRuleChain(db, agentId),
    ownerIsAdmin: (owner) => ownerIsAdmin(db, owner),
    loadSkills: (agentId) => listSkills(db, { scope: 'all', agentId }),
    secrets: { seal: (plain) => plain, open: (sealed) => sealed },
    maxMessages: 50,
    // Compaction needs a model's context_window: the fakes know none unless a test passes `modelInfo`.
    compaction: () => ({ mode: 'auto', strategy: 'summary', keep_recent_count: 10, target_tokens_percent: 70, min_messages_to_compact: 20 }),
    modelInfo: async () => undefined,
    maxFileBytes: 1024 * 1024,
    allowUnsandboxedBash: () => false,
    workspaceByteLimit: async () => undefined,
    bounds: () => ({ maxCallDepth: 8, maxRunMs: 600_000, maxModelCalls: 200, maxToolCalls: 500, maxToolTimeoutMs: 600_000 }),
    builtin: {},
    chains: {
      runner: new ChainRunner(),
      sandbox: {
        run: async () => {
          throw new Error('scripts do not run in fakeRunDeps');
        },
      },
    },
    publishInvalidate: async () => {},
    sendMessage: async () => {
      throw new Error('no channels in fakeRunDeps');
    },
    replies: {
      queue: async (_tx, runId, _reply, text) => {
        record.replies.push({ runId, text });
        return `out_${record.replies.length}`;
      },
      enqueue: async () => {},
    },
    metrics: { runEnded: ({ status, source }) => void record.ended.push({ status, source }) },
    delivered: () => void record.delivered++,
    ...overrides,
    stream: (req) => {
      record.calls.push(req);
      return stream(req);
    },
  };
  return { deps, record };
}

/** An admin's agent run in open mode: every power the policy grants (tests of a tool's own behaviour). */
export const ADMIN = { principal: '', agentOwner: 'admin', owner: 'admin', admin: true } as const;
