import type { Platform } from '@agentry/contracts';

/**
 * One messaging platform behind one interface. An adapter is stateless: the account (settings
 * and unsealed secrets) and the I/O it may use come in with every call, so one adapter object
 * serves every account of its platform on every replica.
 */
export interface ChannelAdapter {
  platform: Exclude<Platform, 'api'>;
  /** Longest text one platform message may carry; longer answers are split before sending. */
  textLimit: number;
  /**
   * The body that acknowledges an accepted event, for platforms that read it (WeCom treats
   * anything but an empty body or `success` as a reply). Default: `{"success":true}` as JSON.
   */
  ack?: { contentType: 'application/json' | 'text/plain'; body: string };
  /** What the platform (as this adapter drives it) can do; the rest answers a clear 400. */
  supports: { image: boolean; file: boolean; inbound: boolean };
  /**
   * The account fields this adapter reads, beyond those of every platform (policies, allow_from,
   * session_scope, description): an account written with any other is refused, naming it, so a
   * misspelt or misplaced field never sits stored and ignored.
   */
  fields: { settings: readonly string[]; secrets: readonly string[] };
  /** Sends one message (text no longer than `textLimit`). Throws PlatformError on failure. */
  send(account: AccountContext, io: AdapterIo, chatId: string, payload: OutboundPayload): Promise<SendResult>;
  /**
   * Verifies and parses one inbound HTTP request from the platform. Throws InboundAuthError
   * (answered 401) when the signature/token is missing or wrong, InboundParseError (400) for a
   * body that is not the platform's event shape.
   */
  parseInbound(account: AccountContext, io: AdapterIo, request: InboundRequest): Promise<InboundResult>;
}

/** The account an operation runs for: settings as written (snake_case) and unsealed secrets. */
export interface AccountContext {
  platform: Platform;
  accountId: string;
  /** Non-secret fields as written: `app_id`, `api_base`, `agent_id`, `robot_code`, ... */
  settings: Readonly<Record<string, unknown>>;
  /** Secret fields as written, unsealed: `app_secret`, `token`, `encrypt_key`, `signing_secret`, `secret`, ... */
  secrets: Readonly<Record<string, string>>;
}

/** Everything an adapter reaches the outside world through (tests substitute each). */
export interface AdapterIo {
  fetch: typeof fetch;
  /** Platform access tokens, cached per account until shortly before they expire. */
  tokens: TokenCache;
  /** Milliseconds since the epoch (signature timestamps, replay windows). */
  now(): number;
  /** Per-request deadline for platform calls. */
  timeoutMs: number;
}

export interface TokenCache {
  /**
   * The cached token under `key`, or the one `fetchToken` returns (concurrent callers share one
   * fetch). `fetchToken` says how long the token lives; it is dropped a margin before that.
   */
  get(key: string, fetchToken: () => Promise<{ token: string; expiresInMs: number }>): Promise<string>;
  /** Forgets a token the platform rejected, so the next `get` fetches a fresh one. */
  invalidate(key: string): void;
}

/** Bytes to upload, or a key the platform already holds (uploaded earlier). */
export type MediaSource = { data: Uint8Array; fileName: string; mimeType?: string } | { key: string; fileName?: string };

export type OutboundPayload =
  | { kind: 'text'; text: string }
  | { kind: 'image'; image: MediaSource }
  | { kind: 'file'; file: MediaSource };

export interface SendResult {
  /** The platform's id of the sent message ('' when the platform returns none, e.g. webhooks). */
  messageId: string;
}

/** An HTTP request from the platform, as the gateway received it. */
export interface InboundRequest {
  method: string;
  /** Lower-cased header names. */
  headers: Readonly<Record<string, string | undefined>>;
  query: Readonly<Record<string, string | undefined>>;
  /** The body exactly as sent: signatures are computed over these bytes. */
  rawBody: Buffer;
}

export type InboundResult = (
  /** A handshake (URL verification): answer it with this body and do nothing else. */
  | { kind: 'challenge'; contentType: 'application/json' | 'text/plain'; body: string }
  /** A message from a user, to route to an agent. */
  | { kind: 'message'; message: InboundMessage }
  /** A verified event that is not a user message (bot echo, reaction, edit): acknowledge, do nothing. */
  | { kind: 'ignored'; reason: string }
) & {
  /**
   * Set by platforms whose signature does not cover the body (it signs only a timestamp): the
   * signature, which the caller must accept once per account and refuse ever after, so that a
   * captured one cannot carry another body.
   */
  singleUse?: string;
};

export interface InboundMessage {
  /** The platform's id of this message or event: duplicates are dropped by it. */
  eventId: string;
  /** Where the answer goes: the value `send` takes as `chatId`. */
  chatId: string;
  chatType: 'dm' | 'group';
  /** The sender's platform id (what `allow_from` lists). */
  senderId: string;
  text: string;
}

/**
 * A platform call failed. `status` is the HTTP status (0 for a network error or timeout);
 * `retryable` is true for 5xx, 429, network errors and the platform's own rate-limit codes;
 * `retryAfterMs` is set when the platform said how long to wait. The message carries the
 * platform's own description and never a secret or a token.
 */
export class PlatformError extends Error {
  readonly status: number;
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;
  constructor(message: string, opts: { status: number; retryable: boolean; retryAfterMs?: number; cause?: unknown }) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'PlatformError';
    this.status = opts.status;
    this.retryable = opts.retryable;
    this.retryAfterMs = opts.retryAfterMs;
  }
}

/** The operation is not possible for this platform/account (send-file on a webhook-only account): answered 400. */
export class UnsupportedOperationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnsupportedOperationError';
  }
}

/** Inbound request without a valid signature, token or secret: answered 401. */
export class InboundAuthError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InboundAuthError';
  }
}

/** Inbound request whose body is not the platform's event shape: answered 400. */
export class InboundParseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InboundParseError';
  }
}

/** An account lacks a field its platform needs (`app_secret`, `agent_id`, ...): answered 400. */
export class AccountConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AccountConfigError';
  }
}
