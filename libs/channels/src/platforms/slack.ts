import { createHmac } from 'node:crypto';
import { apiBase, requireField } from '../account-fields.js';
import {
  InboundAuthError,
  InboundParseError,
  PlatformError,
  UnsupportedOperationError,
  type AccountContext,
  type AdapterIo,
  type ChannelAdapter,
  type InboundRequest,
  type InboundResult,
  type MediaSource,
  type SendResult,
} from '../adapter.js';
import { constantTimeEqual } from '../constant-time.js';
import { callPlatform, httpError, retryAfterMs } from '../http.js';
import { asRecord, parseInboundJson, requireString } from '../json-body.js';

/**
 * Slack Web API with a bot token (xoxb-…), and the Events API for inbound. Slack reports most
 * failures as HTTP 200 with `{ok:false, error}`, so every answer's `ok` is checked; the bot token is
 * long-lived, so `io.tokens` is unused.
 */

const DEFAULT_API_BASE = 'https://slack.com/api';

/** Slack's replay window for signed requests. */
const SIGNATURE_WINDOW_MS = 5 * 60_000;

/** `{ok:false}` codes that describe a passing condition on Slack's side rather than a bad request. */
const RETRYABLE_ERRORS = new Set(['ratelimited', 'rate_limited', 'internal_error', 'fatal_error', 'service_unavailable', 'request_timeout']);

export const slack: ChannelAdapter = {
  platform: 'chat_e',
  fields: { settings: ['api_base'], secrets: ['app_secret', 'signing_secret'] },
  // Slack cuts text at 40,000 characters but recommends staying under 4,000 per message.
  textLimit: 4000,
  supports: { image: true, file: true, inbound: true },

  async send(account, io, chatId, payload) {
    const api = apiEndpoint(account);
    switch (payload.kind) {
      case 'text': {
        const answer = await call(io, api, 'chat.postMessage', jsonBody({ channel: chatId, text: escapeText(payload.text) }));
        return { messageId: requireString(answer.ts, 'chat_e chat.postMessage', 'ts') };
      }
      case 'image':
        if ('key' in payload.image) return sendImageByKey(io, api, chatId, payload.image);
        return uploadFile(io, api, chatId, payload.image);
      case 'file':
        if ('key' in payload.file) {
          // Slack documents no call that shares an already uploaded file into another conversation.
          throw new UnsupportedOperationError('chat_e: sending an existing file by key is not supported; send the bytes');
        }
        return uploadFile(io, api, chatId, payload.file);
    }
  },

  // async so that a rejected request is a rejected promise, never a synchronous throw.
  async parseInbound(account, io, request) {
    return parseEvent(account, io, request);
  },
};

interface ApiEndpoint {
  base: string;
  token: string;
}

function apiEndpoint(account: AccountContext): ApiEndpoint {
  const token = requireField(account.secrets.app_secret, 'chat_e: the account has no bot token (app_secret)');
  return { base: apiBase(account.settings.api_base, DEFAULT_API_BASE), token };
}

/**
 * `&`, `<` and `>` are Slack's control characters (`<!channel>`, `<@U…>`, `<url|label>`); Slack
 * asks senders to escape them so that agent output cannot ping a whole channel or forge a link.
 */
function escapeText(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

interface ApiBody {
  contentType: string;
  body: string;
}

function jsonBody(body: unknown): ApiBody {
  // Without the charset Slack answers with a missing_charset warning.
  return { contentType: 'application/json; charset=utf-8', body: JSON.stringify(body) };
}

function formBody(fields: Record<string, string>): ApiBody {
  return { contentType: 'application/x-www-form-urlencoded', body: new URLSearchParams(fields).toString() };
}

/** One Web API method; answers its body when `ok` is true and throws PlatformError otherwise. */
async function call(io: AdapterIo, api: ApiEndpoint, method: string, request: ApiBody): Promise<Record<string, unknown>> {
  const what = `chat_e ${method}`;
  const res = await callPlatform(io, what, `${api.base}/${method}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${api.token}`, 'content-type': request.contentType },
    body: request.body,
  });
  const body = asRecord(res.json);
  if (res.status < 200 || res.status >= 300) throw httpError(what, res, io, body ? slackDetail(body) : undefined);
  if (!body) throw new PlatformError(`${what}: the answer is not JSON`, { status: res.status, retryable: false });
  if (body.ok !== true) {
    const code = typeof body.error === 'string' ? body.error : '';
    const retryable = RETRYABLE_ERRORS.has(code);
    const after = retryAfterMs(res.headers, io.now());
    const opts = after === undefined ? { status: res.status, retryable } : { status: res.status, retryable, retryAfterMs: after };
    throw new PlatformError(`${what}: ${slackDetail(body)}`, opts);
  }
  return body;
}

/** Slack's error code, plus the scope it wanted and its argument complaints when it names them. */
function slackDetail(body: Record<string, unknown>): string {
  let text = typeof body.error === 'string' ? body.error : 'no error code';
  if (typeof body.needed === 'string') text += ` (needs scope ${body.needed})`;
  const messages = asRecord(body.response_metadata)?.messages;
  if (Array.isArray(messages)) {
    const said = messages.filter((m): m is string => typeof m === 'string').slice(0, 3);
    if (said.length > 0) text += `: ${said.join('; ')}`;
  }
  return text;
}

/**
 * The external upload flow (files.upload is retired): reserve an upload URL, post the raw bytes
 * there, then complete the upload into the conversation. Slack shares the file asynchronously and
 * answers no message ts, so the file id stands for the message.
 */
async function uploadFile(io: AdapterIo, api: ApiEndpoint, chatId: string, source: Extract<MediaSource, { data: Uint8Array }>): Promise<SendResult> {
  const reserved = await call(
    io,
    api,
    'files.getUploadURLExternal',
    formBody({ filename: source.fileName, length: String(source.data.byteLength) }),
  );
  const uploadUrl = requireString(reserved.upload_url, 'chat_e files.getUploadURLExternal', 'upload_url');
  const fileId = requireString(reserved.file_id, 'chat_e files.getUploadURLExternal', 'file_id');

  // The upload URL is pre-signed: it takes no token, and none is sent to it.
  const what = 'chat_e file upload';
  const res = await callPlatform(io, what, uploadUrl, {
    method: 'POST',
    headers: { 'content-type': source.mimeType ?? 'application/octet-stream' },
    body: source.data,
  });
  if (res.status < 200 || res.status >= 300) throw httpError(what, res, io);

  const done = await call(io, api, 'files.completeUploadExternal', jsonBody({ files: [{ id: fileId, title: source.fileName }], channel_id: chatId }));
  const first = Array.isArray(done.files) ? asRecord(done.files[0]) : undefined;
  return { messageId: typeof first?.id === 'string' ? first.id : fileId };
}

/**
 * An image Slack already holds is shown with a Block Kit image block referring to it by id; Slack
 * documents this for png, jpg, jpeg and gif files the bot can see.
 */
async function sendImageByKey(io: AdapterIo, api: ApiEndpoint, chatId: string, source: { key: string; fileName?: string }): Promise<SendResult> {
  const label = source.fileName || 'image';
  const answer = await call(
    io,
    api,
    'chat.postMessage',
    jsonBody({
      channel: chatId,
      // The notification and screen-reader fallback for the block.
      text: escapeText(label),
      blocks: [{ type: 'image', slack_file: { id: source.key }, alt_text: label }],
    }),
  );
  return { messageId: requireString(answer.ts, 'chat_e chat.postMessage', 'ts') };
}

function parseEvent(account: AccountContext, io: AdapterIo, request: InboundRequest): InboundResult {
  verifySignature(account, io, request);

  const envelope = asRecord(parseInboundJson(request.rawBody, 'chat_e: the body is not JSON'));
  if (!envelope || typeof envelope.type !== 'string') throw new InboundParseError('chat_e: the body is not a Slack Events API request');

  if (envelope.type === 'url_verification') {
    if (typeof envelope.challenge !== 'string') throw new InboundParseError('chat_e: url_verification without a challenge');
    return { kind: 'challenge', contentType: 'text/plain', body: envelope.challenge };
  }
  if (envelope.type !== 'event_callback') return { kind: 'ignored', reason: `request type ${envelope.type}` };

  const event = asRecord(envelope.event);
  if (!event || typeof event.type !== 'string') throw new InboundParseError('chat_e: event_callback without an event');
  if (event.type !== 'message' && event.type !== 'app_mention') return { kind: 'ignored', reason: `event type ${event.type}` };
  // Edits, deletions, joins, file shares and bot posts (our own replies included) all carry one of these.
  if (typeof event.subtype === 'string') return { kind: 'ignored', reason: `message subtype ${event.subtype}` };
  if (event.bot_id !== undefined && event.bot_id !== null) return { kind: 'ignored', reason: 'message from a bot' };

  const { channel, ts, user, text } = event;
  if (typeof channel !== 'string' || !channel || typeof ts !== 'string' || !ts) {
    throw new InboundParseError(`chat_e: ${event.type} event without channel or ts`);
  }
  if (typeof user !== 'string' || !user) return { kind: 'ignored', reason: 'message without a user' };
  if (typeof text !== 'string' || !text) return { kind: 'ignored', reason: 'message without text' };

  return {
    kind: 'message',
    message: {
      // A mention in a channel the bot is in arrives twice (message and app_mention, each with its
      // own event_id); the message's ts is unique within its channel and names it in both.
      eventId: `${channel}:${ts}`,
      chatId: channel,
      chatType: event.type === 'message' && event.channel_type === 'im' ? 'dm' : 'group',
      senderId: user,
      text,
    },
  };
}

/** `x-slack-signature` is `v0=` + hex HMAC-SHA256(signing secret, `v0:<timestamp>:<raw body>`). */
function verifySignature(account: AccountContext, io: AdapterIo, request: InboundRequest): void {
  const secret = account.secrets.signing_secret;
  if (!secret) throw new InboundAuthError('chat_e: the account has no signing_secret to check requests against');
  const timestamp = request.headers['x-slack-request-timestamp'];
  const signature = request.headers['x-slack-signature'];
  if (!timestamp || !signature) throw new InboundAuthError('chat_e: missing request signature or timestamp');
  if (!/^\d+$/.test(timestamp)) throw new InboundAuthError('chat_e: malformed request timestamp');
  // A captured request replayed later must not pass.
  if (Math.abs(io.now() - Number(timestamp) * 1000) > SIGNATURE_WINDOW_MS) {
    throw new InboundAuthError('chat_e: request timestamp outside the 5-minute window');
  }
  const expected = `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:`).update(request.rawBody).digest('hex')}`;
  if (!constantTimeEqual(signature, expected)) throw new InboundAuthError('chat_e: wrong request signature');
}
