import type { Logger } from 'pino';
import type { Db } from '@agentry/db';
import type { InvalidateMessage } from '@agentry/contracts';
import type { RunAuthority } from '@agentry/definitions';

/**
 * What a tool run gets. Tools work on the agent's Postgres workspace and records, never on the
 * local disk, and stop when `signal` aborts (cancel, timeout, shutdown).
 */
export interface ToolContext {
  db: Db;
  agentId: string;
  runId: string;
  sessionId: string | null;
  signal: AbortSignal;
  logger: Logger;
  /** Per-agent tool settings from the `ai/agent` node's `tools[].config` for this tool. */
  config: Record<string, unknown>;
  /** The deployment's largest workspace file (`workspace.max_file_bytes`); a tool's own limit may only be lower. */
  maxFileBytes?: number;
  /**
   * The most bytes of files the agent's workspace may hold (its owner's
   * `security.quotas.workspaceBytesPerAgent`); resolves undefined, or absent: no limit.
   */
  workspaceByteLimit?: () => Promise<number | undefined>;
  /** `security.allowUnsandboxedBash`: whether the bash tool may run with `sandbox: none`. Absent: it may not. */
  allowUnsandboxedBash?: boolean;
  /**
   * Tells every replica that something it caches changed (the cron tool's edits reach the
   * scheduler at once instead of at its next reconcile). Absent in contexts without a bus.
   */
  publishInvalidate?: (message: InvalidateMessage) => Promise<void>;
  /**
   * Who the run acts for and with what powers, at the definition whose tool this is: tools that
   * use a power decided where it is used (`send_message`) ask the policy with it. Absent: such a
   * tool refuses.
   */
  authority?: RunAuthority;
  /**
   * Sends a text through a channel account and resolves when the platform accepted it (or
   * rejects with the platform's error, or with the policy's refusal: `refusal` with a `send`
   * capability, once the account is known). Absent where channels are not wired.
   */
  sendMessage?: (input: SendMessageInput) => Promise<{ messageId: string }>;
}

/** What the `send_message` tool asks to send, and on whose authority. */
export interface SendMessageInput {
  agentId: string;
  platform: string;
  accountId?: string;
  chatId: string;
  text: string;
  authority: RunAuthority;
  /** The tool's config lists this chat in `chatIds` (an admin's definition may reach it past the account's allow_from). */
  pinned: boolean;
}

/** A tool the model may call. `parameters` is a JSON schema (TypeBox) of the arguments object. */
export interface ToolDefinition {
  name: string;
  description: string;
  parameters: object;
  /** Off unless an agent lists the tool by name (bash, http_fetch). */
  optIn?: boolean;
  /** Answers the tool's output as text; throws ToolError (or any error) to report a failure to the model. */
  run(args: Record<string, unknown>, ctx: ToolContext): Promise<string>;
}

/** A failure the model should see as the tool's result (marked as an error), not a crash. */
export class ToolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ToolError';
  }
}
