/**
 * Both ends of the run event protocol on `run:<id>` (or the waiting gateway's `replies:<id>`,
 * demultiplexed by `GatewayReplies`): the worker's publisher and the gateway's
 * queue and relay. The rule they share: every event of a run carries `seq`, starting at 0 and
 * contiguous, in publish order; an `error` may come at any seq and ends the run like `done`.
 * The publisher keeps it (text deltas coalesce, other events wait for the text before them);
 * the queue checks it (a gap fails the relay with EventGapError rather than emit a corrupted
 * answer); the relay ends from the stored run when the events go quiet (pub/sub is
 * at-most-once). test/run-events.test.ts runs the two ends against each other.
 */
export { RunEventPublisher, type EventBody } from './publisher.js';
export { EventGapError, RunEventQueue } from './queue.js';
export { RunRelay, storedEnding, type RelayNext } from './relay.js';
export { RunLeaseWatch, WORKER_LOST_MESSAGE, handOffRun, relayLease, type RelayLease, type WatchedLease } from './lease.js';
export { GatewayReplies, runEventChannel } from './replies.js';
