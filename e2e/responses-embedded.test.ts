import { describe } from 'vitest';
import { responsesConformance } from './responses-conformance.js';
import { responsesLifecycleConformance } from './responses-lifecycle.js';
import { embeddedTarget } from './targets.js';

/** The Responses API suite against embedded mode: one process, PGlite, the in-process bus. */
describe('responses API, embedded mode', () => {
  const target = embeddedTarget('responses');
  responsesConformance(target);
  responsesLifecycleConformance(target);
});
