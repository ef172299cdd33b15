import type { Logger } from 'pino';
import { markRunStreamed, type FinalRunStatus, type RunRecord } from '@agentry/db';
import type { LoopEvent } from '../../agent/loop.js';
import { RunEventPublisher, type EventBody } from '../events/publisher.js';
import { retryWhileDbDown } from './db-retry.js';
import type { RunDeps } from './deps.js';

/**
 * What the answering agent has sent so far and when: the run's events in order, the text seen
 * (a cancelled or failed run keeps it as its output), the streamed mark and the timings that
 * end up in the log and the metrics.
 */
export class RunProgress {
  readonly log: Logger;
  output = '';
  readonly #events: RunEventPublisher;
  readonly #started = Date.now();
  #ttftMs: number | undefined;
  #marked = false;

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

  emit(event: EventBody): Promise<void> {
    return this.#events.event(event);
  }

  /**
   * `streamed` is what keeps a takeover (after this worker died) from running the run again
   * once the client has seen output. The first text is published while the mark is being
   * written, and the loop goes on (next delta, any tool) only once the mark is committed. A
   * death between the two leaves at most that one event seen with `streamed` unset: the
   * takeover then runs again and its first event (seq 0) is a gap to the relay, which fails
   * the stream cleanly and cancels the run; no tool of this attempt can have run by then. A
   * tool event is still published only after the mark (a retry would run the tool twice).
   */
  async onLoopEvent(ev: LoopEvent): Promise<void> {
    if (ev.type !== 'text') {
      if (!this.#marked) await this.#mark();
      await this.emit(ev);
      return;
    }
    this.#ttftMs ??= Date.now() - this.#started;
    this.output += ev.text;
    if (this.#marked) return this.#events.text(ev.text);
    const mark = this.#mark();
    try {
      this.#events.text(ev.text);
    } finally {
      await mark;
    }
  }

  #mark(): Promise<unknown> {
    this.#marked = true;
    return retryWhileDbDown(this.log, 'mark run streamed', () => markRunStreamed(this.deps.db, this.run.id));
  }

  /** How long the run took, and to its first token when it streamed one (for the log). */
  timing(): { durationMs: number; ttftMs?: number } {
    return { durationMs: Date.now() - this.#started, ...(this.#ttftMs !== undefined ? { ttftMs: this.#ttftMs } : {}) };
  }

  count(status: FinalRunStatus): void {
    this.deps.metrics.runEnded({ status, source: this.run.source, ...this.timing() });
  }
}
