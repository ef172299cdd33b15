import { useCallback, useEffect, useRef, useState, type Dispatch, type KeyboardEvent, type RefObject, type SetStateAction } from 'react';
import { api, fetchAll, messageOf } from '../lib/api';
import { distinctTitles, filterItems, plainTitle } from '../lib/lists';
import { ApiError, describeRetry, platformName, type AguiToolEvent, type RetryNotice } from '@agentry/client';
import { streamChat } from '../lib/chat-stream';
import { useLoad } from '../lib/hooks';
import { Link, navigate } from '../lib/router';
import { applyText, applyToolResult, applyToolStart, prettyJson, turnsFromHistory, type AssistantTurn, type ToolPart, type Turn } from '../lib/turns';
import type { AgentListItem, Session, SessionMessage } from '@agentry/client';
import { Markdown } from '../components/Markdown';
import { FirstSteps } from '../components/FirstSteps';
import { ErrorText, Loading, SearchField, fmtTime } from '../components/ui';
import { useApp } from '../context';

let keySeq = 0;
const uid = () => `t${Date.now().toString(36)}${(keySeq++).toString(36)}`;

/** A fresh session key for a new conversation (the chat request's `sessionId`). */
function newSessionKey(): string {
  const random = Array.from(crypto.getRandomValues(new Uint8Array(4)), (b) => b.toString(16).padStart(2, '0')).join('');
  return `web-${new Date().toISOString().slice(0, 10).replace(/-/g, '')}-${random}`;
}

export function ChatPage({ agentId, sessionKey }: { agentId?: string | undefined; sessionKey?: string | undefined }) {
  const agents = useLoad(async () => ({ data: await fetchAll<AgentListItem>('/agents') }), []);
  // Tagged with the agent it belongs to: after a switch, the previous agent's list is not this one's.
  // Every conversation with a stored message (an empty one has nothing to show).
  const sessions = useLoad(async () => (agentId ? { agentId, data: await fetchAll<Session>('/sessions', { agentId, nonEmpty: true }) } : undefined), [agentId]);
  const sessionList = sessions.data?.agentId === agentId ? sessions.data : undefined;
  const [showSessions, setShowSessions] = useState(false);

  // /chat: the first agent. /chat/<agent>: its latest web conversation, or a new one.
  useEffect(() => {
    if (!agentId && agents.data?.data[0]) navigate(`/chat/${encodeURIComponent(agents.data.data[0].ruleChain.id)}`, { replace: true });
  }, [agentId, agents.data]);
  useEffect(() => {
    if (!agentId || sessionKey || !sessionList) return;
    const latest = sessionList.data.find((s) => s.channel === 'api');
    navigate(`/chat/${encodeURIComponent(agentId)}/${encodeURIComponent(latest?.sessionKey ?? newSessionKey())}`, { replace: true });
  }, [agentId, sessionKey, sessionList]);

  if (agents.error) return <ErrorText error={agents.error} />;
  if (!agents.data) return <Loading />;
  if (agents.data.data.length === 0) {
    return (
      <div className="page">
        <h1>Chat</h1>
        <FirstSteps agents={0} />
        <p>
          There is no agent to talk to yet. <Link to="/agents/new">Create one from the template</Link>.
        </p>
      </div>
    );
  }
  const session = sessionList?.data.find((s) => s.sessionKey === sessionKey && s.channel === 'api') ?? sessionList?.data.find((s) => s.sessionKey === sessionKey);

  return (
    <div className={`chat-layout${showSessions ? ' sessions-open' : ''}`}>
      <SessionsAside
        agents={agents.data.data}
        agentId={agentId}
        sessionKey={sessionKey}
        sessions={sessionList?.data}
        currentId={session?.id}
        error={sessions.error}
        onPicked={() => setShowSessions(false)}
      />
      {agentId && sessionKey ? (
        <Conversation
          key={`${agentId}/${sessionKey}`}
          agentId={agentId}
          sessionKey={sessionKey}
          session={session}
          sessionsLoaded={sessionList !== undefined}
          onChanged={sessions.reload}
          onToggleSessions={() => setShowSessions((v) => !v)}
          sessionsOpen={showSessions}
        />
      ) : (
        <section className="conversation">
          <Loading />
        </section>
      )}
    </div>
  );
}

/** The agent select, "New conversation", and the agent's sessions. */
function SessionsAside({
  agents,
  agentId,
  sessionKey,
  sessions,
  currentId,
  error,
  onPicked,
}: {
  agents: AgentListItem[];
  agentId: string | undefined;
  sessionKey: string | undefined;
  sessions: Session[] | undefined;
  currentId: string | undefined;
  error: string | null;
  onPicked: () => void;
}) {
  const agentKnown = agentId && agents.some((a) => a.ruleChain.id === agentId);
  const [search, setSearch] = useState('');
  const titles = distinctTitles(sessions ?? [], fmtTime);
  const shown = filterItems(sessions ?? [], search, (s) => [titles.get(s.id), s.title, s.sessionKey]);
  return (
    <aside className="chat-sessions" aria-label="Conversations">
      <label className="field">
        <span>Agent</span>
        <select value={agentId ?? ''} onChange={(e) => navigate(`/chat/${encodeURIComponent(e.target.value)}`)}>
          {!agentKnown ? <option value={agentId ?? ''}>{agentId ?? 'Choose an agent'}</option> : null}
          {agents.map((a) => (
            <option key={a.ruleChain.id} value={a.ruleChain.id}>
              {a.ruleChain.name || a.ruleChain.id}
            </option>
          ))}
        </select>
      </label>
      <button type="button" onClick={() => agentId && navigate(`/chat/${encodeURIComponent(agentId)}/${newSessionKey()}`)} disabled={!agentId}>
        New conversation
      </button>
      <h2 className="sessions-title">Conversations</h2>
      <ErrorText error={error} />
      {sessions && sessions.length > 5 ? <SearchField label="Search conversations" value={search} onValue={setSearch} /> : null}
      <ul className="session-list">
        {shown.map((s) => (
          <li key={s.id}>
            <Link
              to={`/chat/${encodeURIComponent(s.agentId)}/${encodeURIComponent(s.sessionKey)}`}
              aria-current={s.sessionKey === sessionKey && s.id === currentId ? 'page' : undefined}
              onClick={onPicked}
            >
              <span className="session-name">{titles.get(s.id)}</span>
              <span className="session-meta">
                {s.channel !== 'api' ? <span className="badge">{platformName(s.channel)}</span> : null} {s.turnCount} {s.turnCount === 1 ? 'message' : 'messages'} · {fmtTime(s.updatedAt)}
              </span>
            </Link>
          </li>
        ))}
        {sessions && sessions.length === 0 ? <li className="muted">No conversations yet.</li> : null}
        {sessions && sessions.length > 0 && shown.length === 0 ? <li className="muted">No conversation matches.</li> : null}
      </ul>
    </aside>
  );
}

interface ConversationProps {
  agentId: string;
  sessionKey: string;
  session: Session | undefined;
  sessionsLoaded: boolean;
  onChanged: () => void;
  onToggleSessions: () => void;
  sessionsOpen: boolean;
}

type SetTurns = Dispatch<SetStateAction<Turn[]>>;

/** The stored history, once the session list says whether this key exists. */
function useSessionHistory(session: Session | undefined, sessionsLoaded: boolean, setTurns: SetTurns) {
  const [historyError, setHistoryError] = useState<string | null>(null);
  const [loadingHistory, setLoadingHistory] = useState(false);
  const loadedRef = useRef(false);
  useEffect(() => {
    if (loadedRef.current || !sessionsLoaded) return;
    loadedRef.current = true;
    if (!session) return;
    setLoadingHistory(true);
    api.get<SessionMessage[]>(`/sessions/${encodeURIComponent(session.id)}/messages`).then(
      (messages) => {
        setTurns((now) => (now.length === 0 ? turnsFromHistory(messages) : now));
        setLoadingHistory(false);
      },
      (err: unknown) => {
        setHistoryError(messageOf(err));
        setLoadingHistory(false);
      },
    );
  }, [session, sessionsLoaded, setTurns]);
  return { historyError, loadingHistory };
}

/** Keeps the list scrolled to the newest text while the reader has not scrolled up. */
function useStickyScroll(turns: Turn[]) {
  const listRef = useRef<HTMLDivElement>(null);
  const stickRef = useRef(true);
  useEffect(() => {
    const el = listRef.current;
    if (el && stickRef.current) el.scrollTop = el.scrollHeight;
  }, [turns]);
  const onScroll = () => {
    const el = listRef.current;
    if (el) stickRef.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
  };
  return { listRef, stickRef, onScroll };
}

/**
 * Streams one answer into the assistant turn `key`. Text is applied once per frame; a tool event
 * first flushes the text before it (order kept). Ends the turn as done, stopped or error.
 */
async function streamInto(
  req: { agentId: string; sessionId: string; content: string },
  update: (fn: (a: AssistantTurn) => AssistantTurn) => void,
  controller: AbortController,
): Promise<'unauthorized' | undefined> {
  let pending = '';
  let frame = 0;
  const flush = () => {
    if (frame) cancelAnimationFrame(frame);
    frame = 0;
    if (!pending) return;
    const chunk = pending;
    pending = '';
    update((a) => ({ ...a, parts: applyText(a.parts, chunk), retrying: undefined }));
  };
  const onTool = (e: AguiToolEvent) => {
    flush();
    const now = performance.now();
    update((a) => ({ ...a, parts: e.type === 'TOOL_CALL_START' ? applyToolStart(a.parts, e, now) : applyToolResult(a.parts, e, now), retrying: undefined }));
  };
  const onText = (t: string) => {
    pending += t;
    if (!frame) frame = requestAnimationFrame(flush);
  };
  const onResume = (resumed: number) => update((a) => ({ ...a, resumed }));
  const onRetry = (n: RetryNotice) => {
    flush();
    update((a) => ({ ...a, retrying: describeRetry(n) }));
  };
  try {
    await streamChat(req, { onText, onTool, onResume, onRetry }, controller.signal);
    flush();
    update((a) => ({ ...a, status: 'done', retrying: undefined }));
  } catch (err) {
    flush();
    if (controller.signal.aborted) update((a) => ({ ...a, status: 'stopped', retrying: undefined }));
    else update((a) => ({ ...a, status: 'error', error: messageOf(err), retrying: undefined }));
    // A 401 sends the tab to the login page: the message must wait for the way back.
    if (err instanceof ApiError && err.status === 401) return 'unauthorized';
  }
  return undefined;
}

/**
 * The composer's text per agent in the tab's sessionStorage, and a sent message until it got an
 * answer: a login redirect (a 401, the first API key making chat key-only) unmounts the page, and
 * the message typed before it must be in the composer on the way back.
 */
const draftKey = (agentId: string) => `agentry.chat.draft.${agentId}`;
const sentKey = (agentId: string) => `agentry.chat.sent.${agentId}`;
function store(key: string, value: string | null): void {
  try {
    if (value) sessionStorage.setItem(key, value);
    else sessionStorage.removeItem(key);
  } catch {
    // Storage refused (private mode, quota): the draft is only not kept.
  }
}
function readDraft(agentId: string): string {
  try {
    const text = sessionStorage.getItem(draftKey(agentId)) || sessionStorage.getItem(sentKey(agentId)) || '';
    sessionStorage.removeItem(sentKey(agentId));
    return text;
  } catch {
    return '';
  }
}

/** The composer's text, the running answer (Stop aborts it; leaving the page too), and send. */
function useChatSend(agentId: string, sessionKey: string, setTurns: SetTurns, stickRef: RefObject<boolean>, onChanged: () => void) {
  const [input, setInput] = useState(() => readDraft(agentId));
  const [streaming, setStreaming] = useState(false);
  useEffect(() => store(draftKey(agentId), input), [agentId, input]);
  const abortRef = useRef<AbortController | null>(null);
  const inputRef = useRef<HTMLTextAreaElement>(null);

  // Leaving the page stops the answer (the gateway cancels the run).
  useEffect(() => () => abortRef.current?.abort(), []);

  /** Sends the composer's text, or `again` (Retry: the text of a failed or stopped turn, the composer left as it is). */
  const send = useCallback(async (again?: string) => {
    const text = (again ?? input).trim();
    if (!text || streaming) return;
    if (again === undefined) setInput('');
    setStreaming(true);
    stickRef.current = true;
    const controller = new AbortController();
    abortRef.current = controller;
    const key = uid();
    setTurns((t) => [...t, { role: 'user', key: uid(), text }, { role: 'assistant', key, parts: [], status: 'streaming' }]);
    const update = (fn: (a: AssistantTurn) => AssistantTurn) => setTurns((ts) => ts.map((t) => (t.key === key && t.role === 'assistant' ? fn(t) : t)));
    store(sentKey(agentId), text);
    try {
      const outcome = await streamInto({ agentId, sessionId: sessionKey, content: text }, update, controller);
      if (outcome !== 'unauthorized') store(sentKey(agentId), null);
    } finally {
      abortRef.current = null;
      setStreaming(false);
      onChanged();
      inputRef.current?.focus();
    }
  }, [agentId, sessionKey, input, streaming, onChanged, setTurns, stickRef]);

  const stop = () => abortRef.current?.abort();
  /** Edit and resend: the turn's text back in the composer, to change before sending. */
  const edit = useCallback((text: string) => {
    setInput(text);
    inputRef.current?.focus();
  }, []);
  return { input, setInput, streaming, send, stop, edit, inputRef };
}

function Conversation({ agentId, sessionKey, session, sessionsLoaded, onChanged, onToggleSessions, sessionsOpen }: ConversationProps) {
  const { notify } = useApp();
  const [turns, setTurns] = useState<Turn[]>([]);
  const { historyError, loadingHistory } = useSessionHistory(session, sessionsLoaded, setTurns);
  const { listRef, stickRef, onScroll } = useStickyScroll(turns);
  const chat = useChatSend(agentId, sessionKey, setTurns, stickRef, onChanged);
  const readOnly = session !== undefined && session.channel !== 'api';

  const clear = async () => {
    if (!window.confirm('Clear this conversation? Its stored messages are deleted.')) return;
    try {
      await api.post('/sessions/clear', { agentId, sessionKey, channel: session?.channel ?? 'api' });
      setTurns([]);
      onChanged();
      notify('Conversation cleared');
    } catch (err) {
      notify(messageOf(err), 'error');
    }
  };

  return (
    <section className="conversation" aria-label="Conversation">
      <div className="conversation-bar">
        <button type="button" className="secondary sessions-toggle" aria-expanded={sessionsOpen} onClick={onToggleSessions}>
          Conversations
        </button>
        <SessionTitle agentId={agentId} session={session} busy={chat.streaming} onChanged={onChanged} />
        <button type="button" className="secondary" onClick={() => void clear()} disabled={chat.streaming || (!session && turns.length === 0)}>
          Clear
        </button>
      </div>
      <div className="messages" ref={listRef} onScroll={onScroll} aria-live="polite" aria-busy={chat.streaming}>
        {loadingHistory ? <Loading what="Loading the conversation" /> : null}
        <ErrorText error={historyError} />
        {/* A conversation is open, so an agent exists. */}
        {turns.length === 0 && !loadingHistory ? <FirstSteps agents={1} /> : null}
        {turns.length === 0 && !loadingHistory ? <p className="muted empty-chat">Send a message to start. Answers stream in as the agent writes them; tool calls show as cards.</p> : null}
        {turns.map((t, i) => {
          if (t.role === 'user') return <UserBubble key={t.key} text={t.text} />;
          // Only the last answer offers Retry: an earlier failure was followed by other turns since.
          const asked = turns[i - 1];
          const recover =
            i === turns.length - 1 && !chat.streaming && !readOnly && (t.status === 'error' || t.status === 'stopped') && asked?.role === 'user' ? asked.text : undefined;
          return <AssistantBubble key={t.key} turn={t} recover={recover === undefined ? undefined : { retry: () => void chat.send(recover), edit: () => chat.edit(recover) }} />;
        })}
      </div>
      <Composer chat={chat} readOnly={readOnly} channel={session?.channel} />
    </section>
  );
}

/** The conversation's title, renamed in place (`PATCH /sessions/{id}`), and Delete (`DELETE /sessions/{id}`). */
function SessionTitle({ agentId, session, busy, onChanged }: { agentId: string; session: Session | undefined; busy: boolean; onChanged: () => void }) {
  const { notify } = useApp();
  const [editing, setEditing] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  if (!session) return <h1 className="conversation-title">New conversation</h1>;
  const save = async () => {
    try {
      await api.patch(`/sessions/${encodeURIComponent(session.id)}`, { title: editing ?? '' });
      setEditing(null);
      setError(null);
      onChanged();
      notify('Conversation renamed');
    } catch (err) {
      setError(messageOf(err));
    }
  };
  const remove = async () => {
    if (!window.confirm(`Delete the conversation "${session.title || session.sessionKey}" and all its messages?`)) return;
    try {
      await api.delete(`/sessions/${encodeURIComponent(session.id)}`);
      notify('Conversation deleted');
      onChanged();
      // A fresh conversation, not "the latest": the list may still hold the deleted one.
      navigate(`/chat/${encodeURIComponent(agentId)}/${newSessionKey()}`);
    } catch (err) {
      notify(messageOf(err), 'error');
    }
  };
  if (editing !== null) {
    return (
      <form className="conversation-title rename-form" onSubmit={(e) => (e.preventDefault(), void save())}>
        <label htmlFor="session-title" className="sr-only">
          Conversation title
        </label>
        <input id="session-title" value={editing} onChange={(e) => setEditing(e.target.value)} maxLength={200} autoFocus />
        <button type="submit" disabled={!editing.trim()}>
          Save
        </button>
        <button type="button" className="secondary" onClick={() => (setEditing(null), setError(null))}>
          Cancel
        </button>
        <ErrorText error={error} />
      </form>
    );
  }
  return (
    <>
      <h1 className="conversation-title">{plainTitle(session.title) || session.sessionKey}</h1>
      <button type="button" className="secondary" onClick={() => setEditing(session.title)} disabled={busy}>
        Rename
      </button>
      <button type="button" className="secondary danger-outline" onClick={() => void remove()} disabled={busy}>
        Delete
      </button>
    </>
  );
}

function Composer({ chat, readOnly, channel }: { chat: ReturnType<typeof useChatSend>; readOnly: boolean; channel: string | undefined }) {
  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      void chat.send();
    }
  };
  return (
    <form
      className="composer"
      onSubmit={(e) => {
        e.preventDefault();
        void chat.send();
      }}
    >
      <label htmlFor="chat-input" className="sr-only">
        Message
      </label>
      <textarea
        id="chat-input"
        ref={chat.inputRef}
        value={chat.input}
        onChange={(e) => chat.setInput(e.target.value)}
        onKeyDown={onKeyDown}
        placeholder={readOnly ? `This conversation came in over ${platformName(channel ?? '')}; it is shown read-only.` : 'Message the agent (Enter sends, Shift+Enter for a new line)'}
        rows={2}
        disabled={readOnly}
      />
      {chat.streaming ? (
        <button type="button" className="danger" onClick={chat.stop}>
          Stop
        </button>
      ) : (
        <button type="submit" disabled={!chat.input.trim() || readOnly}>
          Send
        </button>
      )}
    </form>
  );
}

function UserBubble({ text }: { text: string }) {
  return (
    <div className="turn turn-user">
      <div className="bubble">{text}</div>
    </div>
  );
}

/** A provider's failure is fixed on the Model providers page (its URL, key or model). */
const PROVIDER_ERROR = /model provider|no model provider|upstream/i;

function AssistantBubble({ turn, recover }: { turn: AssistantTurn; recover?: { retry: () => void; edit: () => void } | undefined }) {
  return (
    <div className="turn turn-assistant" data-status={turn.status}>
      <div className="bubble">
        {turn.parts.map((p, i) => (p.kind === 'text' ? <Markdown key={i} text={p.text} /> : <ToolCard key={p.id || i} part={p} />))}
        {turn.status === 'streaming' && turn.parts.length === 0 ? <p className="thinking">Thinking…{turn.retrying ? ` (${turn.retrying})` : ''}</p> : null}
        {turn.status === 'streaming' && turn.parts.length > 0 && turn.retrying ? <p className="thinking retrying">Thinking… ({turn.retrying})</p> : null}
        {turn.resumed ? (
          <p className="muted resumed" title="The connection dropped during the answer; it was picked up again where it stopped, nothing is missing.">
            Connection lost and resumed{turn.resumed > 1 ? ` (${turn.resumed} times)` : ''}.
          </p>
        ) : null}
        {turn.status === 'stopped' ? <p className="muted stopped">Stopped before the answer was complete.</p> : null}
        {turn.status === 'error' ? <ErrorText className="turn-error" error={turn.error || 'the answer failed'} /> : null}
        {turn.status === 'error' && PROVIDER_ERROR.test(turn.error ?? '') ? (
          <p className="turn-fix">
            <Link to="/providers">Check the model provider</Link> (its address, key and model), then retry.
          </p>
        ) : null}
        {recover ? (
          <div className="turn-actions">
            <button type="button" className="secondary" onClick={recover.retry}>
              Retry
            </button>
            <button type="button" className="secondary" onClick={recover.edit}>
              Edit and resend
            </button>
          </div>
        ) : null}
      </div>
    </div>
  );
}

function ToolCard({ part }: { part: ToolPart }) {
  const running = part.result === undefined;
  const state = running ? 'running' : part.error ? 'error' : 'ok';
  return (
    <details className={`tool-card tool-${state}`} data-tool={part.name}>
      <summary>
        <span className="tool-name">{part.name}</span>
        {part.toolType && part.toolType !== 'builtin' ? <span className="badge">{part.toolType}</span> : null}
        <span className="tool-state">{running ? 'running…' : part.error ? 'failed' : 'done'}</span>
        {part.durationMs !== undefined ? <span className="tool-duration">{part.durationMs < 1000 ? `${Math.round(part.durationMs)} ms` : `${(part.durationMs / 1000).toFixed(1)} s`}</span> : null}
      </summary>
      <div className="tool-body">
        <h3>Arguments</h3>
        <pre>{prettyJson(part.arguments) || '(none)'}</pre>
        <h3>Result</h3>
        {running ? <p className="muted">Waiting for the tool…</p> : <pre className={part.error ? 'tool-result error' : 'tool-result'}>{part.result || '(empty)'}</pre>}
      </div>
    </details>
  );
}
