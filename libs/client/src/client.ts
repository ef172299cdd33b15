import { readChatStream, type ChatChunk, type ChatCompletion, type ChatRequest, type ResumePoint, type RetryNotice } from './chat.js';
import type { SseBody } from './sse.js';
import { StreamError } from './errors.js';
import { Http, type ClientOptions, type QueryValue } from './http.js';
import type {
  AgentHeartbeat,
  AgentListItem,
  HeartbeatSettings,
  ApiKeyAnswer,
  ApiKeyRegenerated,
  AgentTemplate,
  AuthStatus,
  ChainWriteOptions,
  ChannelPlatformView,
  ChannelsView,
  ConfigView,
  CronJob,
  CronRun,
  LoginResult,
  ModelList,
  NewCronJob,
  Page,
  PageQuery,
  PasswordChanged,
  ReloadResult,
  RuleChainDsl,
  RuleListItem,
  RunSteps,
  RunSummary,
  SendMessage,
  Session,
  SessionCompaction,
  SessionFilter,
  SessionMessage,
  Skill,
  SkillScope,
  SkillUploadResult,
  Success,
  UsageQuery,
  UsageReport,
  ToolInfo,
  User,
  UserList,
  UserChange,
  UserRole,
  WorkspaceEntry,
  WorkspaceFile,
  WorkspaceWritten,
} from './types.js';

const seg = encodeURIComponent;

/** How long a stop waits for the server to take the cancel (the caller is leaving). */
const CANCEL_TIMEOUT_MS = 2_000;

/**
 * The chunks of `inner`; when the caller's `signal` stops them before the end, the run is
 * cancelled on the server before the abort reaches the caller (a CLI that exits right after
 * still has it done). Its id comes from the first chunk (`chatcmpl-<runId>`): a stop before any
 * chunk leaves the run to the server's resume grace.
 */
async function* cancelledOnAbort(inner: AsyncGenerator<ChatChunk>, signal: AbortSignal | undefined, cancel: (runId: string) => Promise<unknown>): AsyncGenerator<ChatChunk> {
  let runId: string | undefined;
  let finished = false;
  try {
    for await (const chunk of inner) {
      runId ??= /^chatcmpl-([0-9a-f]{32})$/.exec(chunk.id)?.[1];
      yield chunk;
    }
    finished = true;
  } finally {
    if (!finished && signal?.aborted && runId) await cancel(runId).catch(() => undefined);
  }
}

/** Base64 of bytes with what every platform has (btoa), 32 KiB at a time. */
function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

/** Every page of a paged list, 100 at a time. */
async function allPages<T>(fetchPage: (q: PageQuery) => Promise<Page<T>>): Promise<T[]> {
  const out: T[] = [];
  for (let page = 1; ; page++) {
    const p = await fetchPage({ page, size: 100 });
    out.push(...p.data);
    if (p.data.length === 0 || out.length >= p.total) return out;
  }
}

export interface SkillSelector {
  scope?: SkillScope;
  /** The agent of a local skill. */
  agentId?: string;
}

/** The request header by which a chat stream's client asks that its run outlive a dropped connection. */
export const RESUMABLE_HEADER = 'x-agentry-resumable';

export interface StreamOptions {
  /** Ask for tool-call events (`X-Stream-Protocol: agui`). */
  agui?: boolean;
  signal?: AbortSignal;
  /**
   * A dropped connection is resumed by itself (`GET /runs/{id}/events` after the last event id,
   * a few tries within the server's grace); `false` turns that off, an object tunes the tries.
   */
  resume?: boolean | { tries?: number; delayMs?: number };
  /** Called each time the stream went on over a new connection after a drop (1, 2, ...). */
  onResume?: (resumes: number) => void;
  /** Called when the server tries the model provider again before the answer started ("attempt 2 of 3"). */
  onRetry?: (notice: RetryNotice) => void;
}

/**
 * A typed client of Agentry's REST API (`/api/v1`) and chat endpoint. One method per route;
 * answers are the server's JSON as it is. Errors: ApiError (status >= 400, the server's
 * `{error}` message), ConnectionError (unreachable), StreamError (a chat stream that failed).
 */
export class AgentryClient {
  readonly http: Http;

  constructor(opts: ClientOptions) {
    this.http = new Http(opts);
  }

  /** The server root (`http://localhost:9527`). */
  get url(): string {
    return this.http.root;
  }

  /** `GET /health` (plain text `OK`). */
  health(signal?: AbortSignal): Promise<string> {
    return this.http.request('GET', '/health', { purpose: 'public', root: true, signal });
  }

  readonly auth = {
    login: (username: string, password: string) =>
      this.http.request<LoginResult>('POST', '/auth/login', { purpose: 'public', json: { username, password } }),
    /** Whether management needs a login, and whose the JWT sent is (public, but it reads the token). */
    status: () => this.http.request<AuthStatus>('GET', '/auth/status', { purpose: 'account' }),
    apiKey: () => this.http.request<ApiKeyAnswer>('GET', '/auth/api-key', { purpose: 'account' }),
    regenerateApiKey: () => this.http.request<ApiKeyRegenerated>('POST', '/auth/api-key', { purpose: 'account' }),
    changePassword: (oldPassword: string, newPassword: string) =>
      this.http.request<PasswordChanged>('PUT', '/auth/password', { purpose: 'account', json: { oldPassword, newPassword } }),
  };

  /** Admin user management (admins only when authentication is required). */
  readonly users = {
    list: async () => (await this.http.request<UserList>('GET', '/users')).users,
    create: (user: { username: string; password: string; role: UserRole }) => this.http.request<User>('POST', '/users', { json: user }),
    update: (username: string, change: UserChange) => this.http.request<User>('PUT', `/users/${seg(username)}`, { json: change }),
    delete: (username: string) => this.http.request<Success>('DELETE', `/users/${seg(username)}`),
  };

  readonly agents = {
    list: (q: PageQuery = {}) => this.http.request<Page<AgentListItem>>('GET', '/agents', { query: { ...q } }),
    listAll: () => allPages((q) => this.agents.list(q)),
    get: (id: string) => this.http.request<RuleChainDsl>('GET', `/agents/${seg(id)}`),
    create: (dsl: RuleChainDsl, opts: ChainWriteOptions = {}) => this.http.request<RuleChainDsl>('POST', '/agents', { json: dsl, query: { ...opts } }),
    update: (id: string, dsl: RuleChainDsl, opts: ChainWriteOptions = {}) =>
      this.http.request<RuleChainDsl>('PUT', `/agents/${seg(id)}`, { json: dsl, query: { ...opts } }),
    delete: (id: string) => this.http.request<Success>('DELETE', `/agents/${seg(id)}`),
    reload: (id: string) => this.http.request<ReloadResult>('POST', `/agents/${seg(id)}/reload`),
    template: () => this.http.request<AgentTemplate>('GET', '/agent-template'),
    /** The agent's runs, newest first, without their content (owner or admin). */
    runs: (id: string, q: PageQuery = {}) => this.http.request<Page<RunSummary>>('GET', `/agents/${seg(id)}/runs`, { query: { ...q } }),
    /** The agent's heartbeat and the cron job that fires it. */
    heartbeat: (id: string) => this.http.request<AgentHeartbeat>('GET', `/agents/${seg(id)}/heartbeat`),
    /** Sets the heartbeat (a save of the agent: validated, its cron job follows). */
    setHeartbeat: (id: string, heartbeat: HeartbeatSettings) => this.http.request<AgentHeartbeat>('PUT', `/agents/${seg(id)}/heartbeat`, { json: heartbeat }),
    /** Removes the heartbeat (its cron job is disabled; its fires stay in the history). */
    deleteHeartbeat: (id: string) => this.http.request<Success>('DELETE', `/agents/${seg(id)}/heartbeat`),
  };

  readonly runs = {
    /** A run's recorded chain steps, to replay on the canvas (its agent's owner or admin). */
    steps: (runId: string) => this.http.request<RunSteps>('GET', `/runs/${seg(runId)}/steps`),
    /**
     * A chat run's stream again, after `lastEventId` (an `id:` of the stream; none: from the
     * start), as an SSE body for readChatStream: what the client missed, then the live rest.
     * 404 for a run that is not the caller's, 410 once its events are no longer kept.
     */
    /**
     * Cancels the caller's own chat run now. A stream whose connection merely dropped keeps its
     * run alive a while for a resume; a caller who stops on purpose says so with this.
     */
    cancel: (runId: string, signal: AbortSignal = AbortSignal.timeout(CANCEL_TIMEOUT_MS)) =>
      this.http.request<{ runId: string; status: string }>('POST', `/runs/${seg(runId)}/cancel`, { purpose: 'chat', signal }),
    events: async (point: ResumePoint, opts: { agui?: boolean; includeUsage?: boolean; signal?: AbortSignal } = {}): Promise<SseBody> => {
      const res = await this.http.send('GET', `/runs/${seg(point.runId)}/events`, {
        purpose: 'chat',
        query: { include_usage: opts.includeUsage === true ? true : undefined },
        headers: {
          accept: 'text/event-stream',
          ...(point.lastEventId !== undefined ? { 'last-event-id': point.lastEventId } : {}),
          ...(opts.agui ? { 'x-stream-protocol': 'agui' } : {}),
        },
        signal: opts.signal,
      });
      if (!res.body) throw new StreamError('the server answered without a body');
      return res.body;
    },
  };

  readonly rules = {
    list: (q: { agentId?: string; category?: string; loaded?: boolean } = {}) => this.http.request<RuleListItem[]>('GET', '/rules', { query: { ...q } }),
    get: (id: string) => this.http.request<RuleChainDsl>('GET', `/rules/${seg(id)}`),
    create: (dsl: RuleChainDsl, opts: ChainWriteOptions = {}) => this.http.request<RuleChainDsl>('POST', '/rules', { json: dsl, query: { ...opts } }),
    update: (id: string, dsl: RuleChainDsl, opts: ChainWriteOptions = {}) =>
      this.http.request<RuleChainDsl>('PUT', `/rules/${seg(id)}`, { json: dsl, query: { ...opts } }),
    delete: (id: string) => this.http.request<Success>('DELETE', `/rules/${seg(id)}`),
    reload: (id: string) => this.http.request<ReloadResult>('POST', `/rules/${seg(id)}/reload`),
  };

  readonly skills = {
    list: (q: PageQuery & { scope?: SkillScope | 'all'; agentId?: string } = {}) => this.http.request<Page<Skill>>('GET', '/skills', { query: { ...q } }),
    listAll: (q: { scope?: SkillScope | 'all'; agentId?: string } = {}) => allPages((p) => this.skills.list({ ...q, ...p })),
    get: (name: string, sel: SkillSelector = {}) => this.http.request<Skill>('GET', `/skills/${seg(name)}`, { query: { ...sel } }),
    create: (skill: { name: string; content: string; description?: string; status?: 'active' | 'draft' } & SkillSelector) =>
      this.http.request<Skill>('POST', '/skills', { json: skill }),
    update: (name: string, change: { content?: string; description?: string; status?: 'active' | 'draft' } & SkillSelector) =>
      this.http.request<Skill>('PUT', `/skills/${seg(name)}`, { json: change }),
    delete: (name: string, sel: SkillSelector = {}) => this.http.request<Success>('DELETE', `/skills/${seg(name)}`, { query: { ...sel } }),
    /** A zip of `<name>/SKILL.md` (or `<name>.md`) entries; written all or nothing. */
    upload: (archive: Uint8Array, opts: SkillSelector & { filename?: string } = {}) => {
      const form = new FormData();
      if (opts.scope) form.set('scope', opts.scope);
      if (opts.agentId) form.set('agentId', opts.agentId);
      form.set('file', new Blob([archive], { type: 'application/zip' }), opts.filename ?? 'skills.zip');
      return this.http.request<SkillUploadResult>('POST', '/skills/upload', { form });
    },
    copy: (body: { name: string; targetScope: SkillScope; agentId: string; newName?: string }) =>
      this.http.request<Skill>('POST', '/skills/copy', { json: body }),
  };

  readonly workspace = {
    list: (agentId: string, path = '') =>
      this.http.request<WorkspaceEntry[]>('GET', `/agents/${seg(agentId)}/workspace/entries`, { query: { path } }),
    read: (agentId: string, path: string) => this.http.request<WorkspaceFile>('GET', `/agents/${seg(agentId)}/workspace/file`, { query: { path } }),
    /** The file's bytes, whatever they are. */
    download: async (agentId: string, path: string): Promise<Uint8Array> => {
      const res = await this.http.send('GET', `/agents/${seg(agentId)}/workspace/download`, { query: { path } });
      return new Uint8Array(await res.arrayBuffer());
    },
    /** Creates or overwrites a file (directories above are created); bytes travel as base64. */
    write: (agentId: string, path: string, content: string | Uint8Array) =>
      this.http.request<WorkspaceWritten>('PUT', `/agents/${seg(agentId)}/workspace/file`, {
        query: { path },
        json: typeof content === 'string' ? { content } : { content: toBase64(content), encoding: 'base64' },
      }),
    /** Creates a file; 409 when the path exists. */
    create: (agentId: string, path: string, content: string) =>
      this.http.request<WorkspaceWritten>('POST', `/agents/${seg(agentId)}/workspace/files`, { json: { path, content } }),
    mkdir: (agentId: string, path: string) => this.http.request<WorkspaceWritten>('POST', `/agents/${seg(agentId)}/workspace/dirs`, { json: { path } }),
    /** Removes a file or a directory with its content. */
    delete: (agentId: string, path: string) => this.http.request<Success>('DELETE', `/agents/${seg(agentId)}/workspace/entry`, { query: { path } }),
    /** `newName` without a slash renames in place; with one it is a path from the root (a move). */
    rename: (agentId: string, path: string, newName: string) =>
      this.http.request<WorkspaceWritten>('PATCH', `/agents/${seg(agentId)}/workspace/rename`, { query: { path }, json: { newName } }),
  };

  readonly cron = {
    list: (q: { agentId?: string } = {}) => this.http.request<CronJob[]>('GET', '/cron', { query: { ...q } }),
    get: (id: string) => this.http.request<CronJob>('GET', `/cron/${seg(id)}`),
    create: (job: NewCronJob) => this.http.request<CronJob>('POST', '/cron', { json: job }),
    update: (id: string, change: Partial<NewCronJob>) => this.http.request<CronJob>('PUT', `/cron/${seg(id)}`, { json: change }),
    toggle: (id: string, disabled: boolean) => this.http.request<CronJob>('PUT', `/cron/${seg(id)}/toggle`, { json: { disabled } }),
    delete: (id: string) => this.http.request<Success>('DELETE', `/cron/${seg(id)}`),
    runs: (id: string, q: PageQuery = {}) => this.http.request<Page<CronRun>>('GET', `/cron/${seg(id)}/runs`, { query: { ...q } }),
  };

  readonly sessions = {
    list: (q: PageQuery & { agentId?: string } = {}) => this.http.request<Page<Session>>('GET', '/sessions', { query: { ...q } }),
    listAll: (q: { agentId?: string } = {}) => allPages((p) => this.sessions.list({ ...q, ...p })),
    messages: (id: string) => this.http.request<SessionMessage[]>('GET', `/sessions/${seg(id)}/messages`),
    clear: (filter: SessionFilter) => this.http.request<Success>('POST', '/sessions/clear', { json: filter }),
    compact: (id: string) => this.http.request<SessionCompaction>('POST', `/sessions/${seg(id)}/compact`),
  };

  /** Tokens used by model calls, totalled by agent, principal, provider or day (users: their own). */
  readonly usage = {
    get: (q: UsageQuery = {}) => this.http.request<UsageReport>('GET', '/usage', { query: { ...q } }),
  };

  readonly channels = {
    list: () => this.http.request<ChannelsView>('GET', '/channels'),
    get: (platform: string) => this.http.request<ChannelPlatformView>('GET', `/channels/${seg(platform)}`),
    send: (platform: string, msg: SendMessage) => this.http.request<unknown>('POST', `/channels/${seg(platform)}/send`, { json: msg }),
  };

  readonly config = {
    get: () => this.http.request<ConfigView>('GET', '/config'),
    /** A partial configuration of the editable keys (`{server: {port: 9600}}`); answers the new view. */
    update: (partial: Record<string, unknown>) => this.http.request<ConfigView>('PUT', '/config', { json: partial }),
  };

  readonly tools = {
    list: () => this.http.request<ToolInfo[]>('GET', '/tools'),
  };

  /** `GET /models`: the agents in the OpenAI format (chat credentials). */
  models(): Promise<ModelList> {
    return this.http.request('GET', '/models', { purpose: 'chat' });
  }

  readonly chat = {
    /** One `chat.completion` (no streaming). */
    complete: (req: ChatRequest, opts: { signal?: AbortSignal } = {}) =>
      this.http.request<ChatCompletion>('POST', '/chat/completions', { purpose: 'chat', json: { ...req, stream: false }, signal: opts.signal }),
    /**
     * The completion's chunks as they arrive. The request is sent (and an HTTP error thrown)
     * before the first chunk is awaited; failures after the start are StreamErrors.
     */
    stream: async (req: ChatRequest, opts: StreamOptions = {}): Promise<AsyncGenerator<ChatChunk>> => {
      const res = await this.http.send('POST', '/chat/completions', {
        purpose: 'chat',
        json: { ...req, stream: true },
        headers: {
          accept: 'text/event-stream',
          ...(opts.agui ? { 'x-stream-protocol': 'agui' } : {}),
          // The server keeps the run through a dropped connection only for a client that says it
          // will come back; any other's disconnect cancels it at once.
          ...(opts.resume !== false ? { [RESUMABLE_HEADER]: 'true' } : {}),
        },
        signal: opts.signal,
      });
      if (!res.body) throw new StreamError('the server answered without a body');
      const tuning = typeof opts.resume === 'object' ? opts.resume : {};
      const notices = opts.onRetry ? { onRetry: opts.onRetry } : {};
      const chunks =
        opts.resume === false
          ? readChatStream(res.body, undefined, notices)
          : readChatStream(
              res.body,
              {
                ...tuning,
                signal: opts.signal,
                onResume: opts.onResume,
                reconnect: (point, signal) => this.runs.events(point, { agui: opts.agui, includeUsage: req.stream_options?.include_usage, signal }),
              },
              notices,
            );
      return cancelledOnAbort(chunks, opts.signal, (runId) => this.runs.cancel(runId));
    },
  };

  /** Any other route, for what this client does not cover yet. */
  raw<T>(method: string, path: string, opts: { json?: unknown; query?: Record<string, QueryValue> } = {}): Promise<T> {
    return this.http.request<T>(method, path, opts);
  }
}
