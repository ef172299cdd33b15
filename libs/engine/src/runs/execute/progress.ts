import type { Logger } from 'pino';
import { markRunStreamed, type FinalRunStatus, type RunRecord } from '@agentry/db';
import type { LoopEvent } from '../../agent/loop.js';
import type { ChainTraceEntry } from '../../chain/runner.js';
import { RunEventPublisher, type EventBody } from '@agentry/runs';
import { retryWhileDbDown } from './db-retry.js';
import type { RunDeps } from './deps.js';

/**
 * How long after its first text a run records `streamed`. An answer that ends sooner (a fast
 * model, a short reply) never writes the mark: its finish ends the run, and the mark only
 * matters while a run is active (the finish records it in the same write). One Postgres write
 * per run fewer, and none on the token path. Short, so that a death mid-answer almost always
 * finds the mark (the client then gets the clean "stopped after it had started answering").
 */
const MARK_AFTER_MS = 50;

/**
 * What the answering agent has sent so far and when: the run's events in order, the text seen
 * (a cancelled or failed run keeps it as its output), the streamed mark and the timings that
 * end up in the log and the metrics.
 */
export class RunProgress {
  readonly log: Logger;
  output = '';
  /** The chain's trace as it grows, when the agent runs as a chain (stored as the run's steps). */
  chainTrace: ChainTraceEntry[] | undefined;
  /** Steps of a run that does not run as a chain (a tool the policy left out): stored as its steps all the same. */
  readonly notes: ChainTraceEntry[] = [];
  readonly #events: RunEventPublisher;
  readonly #started = Date.now();
  #ttftMs: number | undefined;
  /** The mark's write, once begun. */
  #marked: Promise<unknown> | undefined;
  #markTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly deps: RunDeps,
    private readonly run: RunRecord,
  ) {
    this.#events = new RunEventPublisher(run.id, deps.publish);
    this.log = deps.logger.child({ runId: run.id, agentId: run.agentId, ...(run.sessionId ? { sessionId: run.sessionId } : {}) });
  }

  started(): void {
    this.log.info({ source: this.run.source, attempt: this.run.attempts, queuedMs: this.#started - this.run.createdAt.getTime() }, 'run started');
  }

  /** A step told to the run's people: in the chain's trace where it grows, else kept beside it. */
  note(entry: ChainTraceEntry): void {
    (this.chainTrace ?? this.notes).push(entry);
  }

  emit(event: EventBody): Promise<void> {
    return this.#events.event(event);
  }

  /**
   * `streamed` is what keeps a takeover (after this worker died) from running the run again
   * once the client has seen output. Text goes out at once and the mark follows MARK_AFTER_MS
   * after the first of it, unless the run has ended by then. A death before the mark leaves the
   * text of those few milliseconds seen with `streamed` unset: the takeover then runs again and
   * its first event (seq 0) is a gap to the relay, which fails the stream cleanly and cancels
   * the run, as it always did for the first event. No tool of this attempt can have run: any
   * other event (a tool's) waits for the mark to be committed first, since a retry would run the
   * tool twice.
   */
  async onLoopEvent(ev: LoopEvent): Promise<void> {
    // A retry notice is not output: no mark (a take-over may still run the run again), no seq.
    if (ev.type === 'retry') {
      await this.#events.notice(ev);
      return;
    }
    if (ev.type !== 'text') {
      await this.#mark();
      await this.emit(ev);
      return;
    }
    this.#ttftMs ??= Date.now() - this.#started;
    this.output += ev.text;
    this.#events.text(ev.text);
    if (!this.#marked && !this.#markTimer) {
      this.#markTimer = setTimeout(() => {
        this.#mark().catch((err: unknown) => this.log.warn({ err }, 'could not mark the run streamed'));
      }, MARK_AFTER_MS);
    }
  }

  #mark(): Promise<unknown> {
    clearTimeout(this.#markTimer);
    this.#marked ??= retryWhileDbDown(this.log, 'mark run streamed', () => markRunStreamed(this.deps.db, this.run.id));
    return this.#marked;
  }

  /** How long the run took, and to its first token when it streamed one (for the log). */
  timing(): { durationMs: number; ttftMs?: number } {
    return { durationMs: Date.now() - this.#started, ...(this.#ttftMs !== undefined ? { ttftMs: this.#ttftMs } : {}) };
  }

  /** Text went out: the finish records `streamed` (the timer may not have). */
  get streamed(): boolean {
    return this.#ttftMs !== undefined;
  }

  /** The run has ended (its final row is written): a mark not yet begun is not needed. */
  count(status: FinalRunStatus): void {
    clearTimeout(this.#markTimer);
    this.deps.metrics.runEnded({ status, source: this.run.source, ...this.timing() });
  }
}
