/**
 * Fake messaging platforms for tests: small HTTP servers on 127.0.0.1 that speak each platform's
 * documented request and response shapes (written from the platforms' public API docs, not from
 * our adapters), record what they were sent, fail on demand, and build signed inbound events the
 * way the platform would post them.
 */
export interface FakeSentMessage {
  /** The chat the message went to, in the form our `chatId` uses for that platform. */
  chatId: string;
  kind: 'text' | 'image' | 'file';
  text?: string;
  /** The platform key of an image/file (uploaded earlier or in this send). */
  key?: string;
  fileName?: string;
  /** Bytes uploaded for this message, when it carried an upload. */
  bytes?: number;
  /** The id the fake answered with. */
  messageId: string;
}

export interface FakeCall {
  method: string;
  /** Path without the query, with any token in the path replaced by `<token>`. */
  path: string;
  query: Record<string, string>;
  headers: Record<string, string>;
}

export interface FakeFailure {
  status: number;
  /** Sets a Retry-After header (seconds). */
  retryAfterSeconds?: number;
  /** The body to answer with; each fake has a platform-shaped default for the status. */
  body?: unknown;
}

export interface FakeInboundEvent {
  eventId: string;
  chatId: string;
  chatType: 'dm' | 'group';
  senderId: string;
  text: string;
}

export interface FakePlatform {
  /** The account's `api_base` pointing at this fake. */
  url: string;
  /** Account fields (as written, snake_case) that make an account talk to this fake. */
  account: Record<string, string>;
  sent: FakeSentMessage[];
  calls: FakeCall[];
  /** How many access tokens were handed out (0 for platforms without tokens). */
  tokenFetches: number;
  /** The next `count` send calls (not token fetches, not uploads) answer with `failure`. */
  failNext(count: number, failure: FakeFailure): void;
  /**
   * An inbound event as the platform would deliver it to our events URL, signed with the account's
   * secret. `query` is set by platforms that sign in the query string (WeCom's msg_signature).
   */
  inbound(event: FakeInboundEvent): { headers: Record<string, string>; body: string; query?: Record<string, string> };
  /** The platform's URL-verification handshake request, where it has one (else undefined). */
  handshake?(): { headers: Record<string, string>; body: string; query?: Record<string, string>; method?: 'GET' | 'POST'; expect: string };
  close(): Promise<void>;
}
