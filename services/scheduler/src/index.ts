export { startScheduler, type SchedulerOptions } from './service.js';
export { Firer, runPrincipal, type FirerOptions } from './fire.js';
export { Reconciler, fireData, type ReconcileResult } from './reconcile.js';
