export { startScheduler, type SchedulerOptions } from './service.js';
export { Firer, OUTPUT_EXCERPT_CHARS, runPrincipal, type FirerOptions } from './fire.js';
export { Reconciler, fireData, type ReconcileResult } from './reconcile.js';
