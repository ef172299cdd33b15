import type { Logger } from 'pino';
import { Errors } from '@agentry/errors';
import type { Consumer, ConsumerOptions, Job, JobHandler, JobOptions, JobQueue, NameOf, PayloadMap } from '../ports.js';
import {
  ABORT_GRACE_MS,
  ConsumerClosingError,
  DEFAULT_BACKOFF_MS,
  DEFAULT_CLOSE_DEADLINE_MS,
  LongTimer,
  backoffDelay,
  checkJobId,
  encodeJson,
  isUnrecoverable,
  normaliseAttempts,
  safeCall,
  settlesWithin,
  toError,
} from '../shared.js';

interface StoredJob {
  id: string;
  queue: string;
  /** JSON text, decoded afresh for every try, so that no try sees another's mutations (as in Redis). */
  payload: string;
  attemptsMade: number;
  attempts: number;
  backoffMs: number;
  /** Enqueued with an id (the port's jobId): deduplicated while live, forgotten once finished. */
  named: boolean;
}

class QueueState {
  readonly waiting: StoredJob[] = [];
  readonly delayed = new Map<string, LongTimer>();
  readonly active = new Map<string, StoredJob>();
  /** Ids given by the caller of jobs waiting, delayed or running. */
  readonly named = new Set<string>();
  readonly consumers = new Set<MemoryConsumer>();
  completed = 0;
  failed = 0;
  dispatchScheduled = false;
  constructor(readonly name: string) {}
}

/** In-process JobQueue for embedded mode: the same observable semantics as the BullMQ adapter. */
export class MemoryJobQueue<M extends PayloadMap> implements JobQueue<M> {
  private readonly states = new Map<string, QueueState>();
  private readonly consumers = new Set<MemoryConsumer>();
  private seq = 0;
  private closed = false;

  constructor(private readonly logger: Logger) {}

  async enqueue<Q extends NameOf<M>>(queue: Q, data: M[Q], opts: JobOptions = {}): Promise<string> {
    this.assertOpen();
    const payload = encodeJson(data, 'job data');
    const st = this.state(queue);
    const jobId = opts.jobId === undefined ? undefined : checkJobId(opts.jobId);
    if (jobId !== undefined && st.named.has(jobId)) return jobId;
    const job: StoredJob = {
      id: jobId ?? String(++this.seq),
      queue,
      payload,
      attemptsMade: 0,
      attempts: normaliseAttempts(opts.attempts),
      backoffMs: opts.backoffMs ?? DEFAULT_BACKOFF_MS,
      named: jobId !== undefined,
    };
    if (job.named) st.named.add(job.id);
    this.schedule(st, job, opts.delayMs ?? 0);
    return job.id;
  }

  consume<Q extends NameOf<M>>(queue: Q, handler: JobHandler<M[Q]>, opts: ConsumerOptions): Consumer {
    this.assertOpen();
    const st = this.state(queue);
    const consumer = new MemoryConsumer(this, st, handler as JobHandler<unknown>, opts, this.logger);
    st.consumers.add(consumer);
    this.consumers.add(consumer);
    this.scheduleDispatch(st);
    return consumer;
  }

  async counts(queue: NameOf<M>): Promise<{ waiting: number; active: number; delayed: number; failed: number; completed: number }> {
    const st = this.state(queue);
    return {
      waiting: st.waiting.length,
      active: st.active.size,
      delayed: st.delayed.size,
      failed: st.failed,
      completed: st.completed,
    };
  }

  /** Closes every consumer (each with the deadline), then drops the timers of delayed jobs. */
  async close(deadlineMs: number): Promise<void> {
    this.closed = true;
    await Promise.all([...this.consumers].map((c) => c.close(deadlineMs)));
    for (const st of this.states.values()) {
      for (const timer of st.delayed.values()) timer.clear();
      st.delayed.clear();
    }
  }

  // The methods below are the consumers' side of the queue.

  scheduleDispatch(st: QueueState): void {
    if (st.dispatchScheduled || this.closed) return;
    st.dispatchScheduled = true;
    // Never hand a job over synchronously: enqueue() resolves before any handler runs, as in Redis.
    setImmediate(() => {
      st.dispatchScheduled = false;
      this.dispatch(st);
    });
  }

  finish(st: QueueState, job: StoredJob, outcome: 'completed' | 'failed'): void {
    st.active.delete(job.id);
    // As in Redis, where a job with an id is removed when it finishes so that the id is free again.
    if (job.named) {
      st.named.delete(job.id);
      return;
    }
    if (outcome === 'completed') st.completed++;
    else st.failed++;
  }

  retry(st: QueueState, job: StoredJob, delayMs: number): void {
    st.active.delete(job.id);
    this.schedule(st, job, delayMs);
  }

  /** A job its consumer gave up at shutdown goes back to the head of the line, its try not counted. */
  requeue(st: QueueState, job: StoredJob): void {
    st.active.delete(job.id);
    st.waiting.unshift(job);
  }

  forget(consumer: MemoryConsumer, st: QueueState): void {
    st.consumers.delete(consumer);
    this.consumers.delete(consumer);
    this.scheduleDispatch(st);
  }

  private schedule(st: QueueState, job: StoredJob, delayMs: number): void {
    // After close nothing will run it, and a timer would keep the process alive.
    if (delayMs > 0 && !this.closed) {
      const timer = new LongTimer(() => {
        st.delayed.delete(job.id);
        st.waiting.push(job);
        this.scheduleDispatch(st);
      }, delayMs);
      st.delayed.set(job.id, timer);
      return;
    }
    st.waiting.push(job);
    this.scheduleDispatch(st);
  }

  private dispatch(st: QueueState): void {
    // Round-robin over consumers with free slots, so that two consumers of one queue share it.
    let progressed = true;
    while (progressed && st.waiting.length > 0) {
      progressed = false;
      for (const consumer of st.consumers) {
        if (!consumer.hasCapacity()) continue;
        const job = st.waiting.shift();
        if (!job) break;
        st.active.set(job.id, job);
        consumer.start(job);
        progressed = true;
      }
    }
  }

  private state(name: string): QueueState {
    let st = this.states.get(name);
    if (!st) {
      st = new QueueState(name);
      this.states.set(name, st);
    }
    return st;
  }

  private assertOpen(): void {
    if (this.closed) throw new Errors.NOT_READY('the bus is closed');
  }
}

class MemoryConsumer implements Consumer {
  private readonly running = new Map<string, { ac: AbortController; done: Promise<void> }>();
  private readonly concurrency: number;
  private stopping = false;
  private abortedForClose = false;
  private closed?: Promise<void>;

  constructor(
    private readonly owner: MemoryJobQueue<PayloadMap>,
    private readonly st: QueueState,
    private readonly handler: JobHandler<unknown>,
    private readonly opts: ConsumerOptions,
    private readonly logger: Logger,
  ) {
    this.concurrency = Math.max(1, Math.floor(opts.concurrency));
  }

  hasCapacity(): boolean {
    return !this.stopping && this.running.size < this.concurrency;
  }

  start(job: StoredJob): void {
    const entry = { ac: new AbortController(), done: Promise.resolve() };
    this.running.set(job.id, entry);
    entry.done = this.run(job, entry.ac);
  }

  close(deadlineMs: number = DEFAULT_CLOSE_DEADLINE_MS): Promise<void> {
    this.closed ??= this.shutdown(deadlineMs);
    return this.closed;
  }

  private async shutdown(deadlineMs: number): Promise<void> {
    this.stopping = true;
    const settled = () => Promise.all([...this.running.values()].map((r) => r.done));
    if (!(await settlesWithin(settled(), deadlineMs))) {
      this.abortedForClose = true;
      for (const r of this.running.values()) r.ac.abort(new ConsumerClosingError());
      if (!(await settlesWithin(settled(), ABORT_GRACE_MS))) {
        this.logger.warn({ queue: this.st.name, jobs: [...this.running.keys()] }, 'jobs ignored their abort signal; leaving them running');
      }
    }
    this.owner.forget(this, this.st);
  }

  private async run(job: StoredJob, ac: AbortController): Promise<void> {
    const view: Job<unknown> = {
      id: job.id,
      queue: job.queue,
      data: JSON.parse(job.payload) as unknown,
      attemptsMade: job.attemptsMade,
      attempts: job.attempts,
    };
    try {
      await this.handler(view, ac.signal);
      this.owner.finish(this.st, job, 'completed');
    } catch (thrown) {
      const err = toError(thrown);
      if (this.abortedForClose && ac.signal.aborted) {
        this.notifyFailed(view, err, true);
        this.owner.requeue(this.st, job);
        return;
      }
      const willRetry = !isUnrecoverable(err) && job.attemptsMade + 1 < job.attempts;
      this.notifyFailed(view, err, willRetry);
      if (willRetry) {
        job.attemptsMade++;
        this.owner.retry(this.st, job, backoffDelay(job.backoffMs, job.attemptsMade));
      } else {
        this.owner.finish(this.st, job, 'failed');
      }
    } finally {
      this.running.delete(job.id);
      this.owner.scheduleDispatch(this.st);
    }
  }

  private notifyFailed(job: Job<unknown>, err: Error, willRetry: boolean): void {
    this.logger.debug({ queue: job.queue, jobId: job.id, err, willRetry }, 'job try failed');
    const onFailed = this.opts.onFailed;
    if (!onFailed) return;
    safeCall(
      () => onFailed(job, err, willRetry),
      (cbErr) => this.logger.error({ err: cbErr, queue: job.queue }, 'onFailed callback threw'),
    );
  }
}
