import { UnrecoverableError, WaitingError, Worker, type Job as BullJob } from 'bullmq';
import type { Redis } from 'ioredis';
import { Errors } from '@agentry/errors';
import type { Consumer, ConsumerOptions, Job, JobHandler, JobOptions, JobQueue, NameOf, PayloadMap } from '../ports.js';
import {
  ABORT_GRACE_MS,
  ConsumerClosingError,
  DEFAULT_BACKOFF_MS,
  DEFAULT_CLOSE_DEADLINE_MS,
  checkJobId,
  isUnrecoverable,
  normaliseAttempts,
  safeCall,
  settlesWithin,
  toError,
} from '../shared.js';
import { KEEP_COMPLETED, KEEP_FAILED, type RedisContext } from './context.js';

export class RedisJobQueue<M extends PayloadMap> implements JobQueue<M> {
  constructor(
    private readonly ctx: RedisContext,
    private readonly consumers: Set<RedisConsumer>,
  ) {}

  async enqueue<Q extends NameOf<M>>(queue: Q, data: M[Q], opts: JobOptions = {}): Promise<string> {
    const jobId = opts.jobId === undefined ? undefined : checkJobId(opts.jobId);
    const q = await this.ctx.queue(queue);
    const job = await this.ctx.command(this.ctx.producer, () => q.add(queue, data, {
      attempts: normaliseAttempts(opts.attempts),
      backoff: { type: 'exponential', delay: opts.backoffMs ?? DEFAULT_BACKOFF_MS },
      ...(opts.delayMs ? { delay: opts.delayMs } : {}),
      // BullMQ's own job id, removed when the job finishes: a kept job would hold its id (a run's
      // re-enqueue after a final failure would add nothing), and the port dedups only while a job
      // waits or runs. Cheaper than BullMQ's deduplication key (its SET, and PTTL, GET and DEL at
      // the finish) and than keeping the job (the finished set's ZADD and its trims).
      ...(jobId !== undefined ? { jobId, removeOnComplete: true, removeOnFail: true } : {}),
    }));
    if (!job.id) throw new Error(`BullMQ returned no id for a job of ${queue}`);
    return job.id;
  }

  consume<Q extends NameOf<M>>(queue: Q, handler: JobHandler<M[Q]>, opts: ConsumerOptions): Consumer {
    return new RedisConsumer(
      this.ctx,
      queue,
      (job, signal) => handler(jobView(job) as Job<M[Q]>, signal),
      opts,
      this.consumers,
    );
  }

  async counts(queue: NameOf<M>): Promise<{ waiting: number; active: number; delayed: number; failed: number; completed: number }> {
    const q = await this.ctx.queue(queue);
    const c = await this.ctx.command(this.ctx.producer, () => q.getJobCounts('waiting', 'active', 'delayed', 'failed', 'completed'));
    return {
      waiting: c.waiting ?? 0,
      active: c.active ?? 0,
      delayed: c.delayed ?? 0,
      failed: c.failed ?? 0,
      completed: c.completed ?? 0,
    };
  }
}

export function jobView(job: BullJob<unknown>): Job<unknown> {
  return {
    id: job.id ?? '',
    queue: job.queueName,
    data: job.data,
    attemptsMade: job.attemptsMade,
    attempts: job.opts.attempts ?? 1,
  };
}

type Run = (job: BullJob<unknown>, signal: AbortSignal) => Promise<void>;

/** A BullMQ Worker on its own connection, with the port's close-with-deadline semantics. */
export class RedisConsumer implements Consumer {
  private readonly conn: Redis;
  private readonly worker: Worker<unknown, void>;
  private readonly running = new Set<AbortController>();
  private abortedForClose = false;
  private closed?: Promise<void>;

  constructor(
    private readonly ctx: RedisContext,
    private readonly queue: string,
    private readonly run: Run,
    private readonly opts: ConsumerOptions,
    private readonly registry: Set<RedisConsumer>,
  ) {
    if (ctx.closed) throw new Errors.NOT_READY('the bus is closed');
    this.conn = ctx.workerConnection(queue);
    // Two parameters on purpose: BullMQ hands a processor of three its own AbortController,
    // and this class owns the signal.
    this.worker = new Worker<unknown, void>(queue, (job, token) => this.process(job, token), {
      connection: this.conn,
      prefix: ctx.prefix,
      concurrency: Math.max(1, Math.floor(opts.concurrency)),
      removeOnComplete: KEEP_COMPLETED,
      removeOnFail: KEEP_FAILED,
      ...(opts.stallMs ? { lockDuration: opts.stallMs, stalledInterval: opts.stallMs } : {}),
    });
    this.worker.on('error', (err) => ctx.logger.error({ err, queue }, 'worker error'));
    registry.add(this);
  }

  close(deadlineMs: number = DEFAULT_CLOSE_DEADLINE_MS): Promise<void> {
    this.closed ??= this.shutdown(deadlineMs);
    return this.closed;
  }

  private async shutdown(deadlineMs: number): Promise<void> {
    // Stops fetching at once, then waits for the running jobs.
    const workerClosed = this.worker.close().catch((err: unknown) => {
      this.ctx.logger.warn({ err, queue: this.queue }, 'worker close failed');
    });
    let clean = await settlesWithin(workerClosed, deadlineMs);
    if (!clean) {
      this.abortedForClose = true;
      for (const ac of this.running) ac.abort(new ConsumerClosingError());
      clean = await settlesWithin(workerClosed, ABORT_GRACE_MS);
      if (!clean) {
        // Handlers deaf to their signal: cut the connection. Their jobs keep the lock until it
        // expires, then BullMQ's stall detection hands them to another worker.
        this.ctx.logger.warn({ queue: this.queue, jobs: this.running.size }, 'jobs ignored their abort signal; force-closing');
      }
    }
    await this.ctx.releaseWorkerConnection(this.conn, !clean);
    this.registry.delete(this);
  }

  private async process(job: BullJob<unknown>, token: string | undefined): Promise<void> {
    const ac = new AbortController();
    this.running.add(ac);
    try {
      await this.run(job, ac.signal);
    } catch (thrown) {
      const err = toError(thrown);
      const view = jobView(job);
      if (this.abortedForClose && ac.signal.aborted && token) {
        // Given up at shutdown, not failed: back to waiting, the try not counted, so that
        // another worker starts it at once instead of after the lock expires.
        this.notifyFailed(view, err, true);
        await job.moveToWait(token);
        throw new WaitingError();
      }
      const unrecoverable = isUnrecoverable(err);
      this.notifyFailed(view, err, !unrecoverable && view.attemptsMade + 1 < view.attempts);
      if (unrecoverable) throw new UnrecoverableError(err.message);
      throw err;
    } finally {
      this.running.delete(ac);
    }
  }

  private notifyFailed(job: Job<unknown>, err: Error, willRetry: boolean): void {
    this.ctx.logger.debug({ queue: job.queue, jobId: job.id, err, willRetry }, 'job try failed');
    const onFailed = this.opts.onFailed;
    if (!onFailed) return;
    safeCall(
      () => onFailed(job, err, willRetry),
      (cbErr) => this.ctx.logger.error({ err: cbErr, queue: job.queue }, 'onFailed callback threw'),
    );
  }
}
