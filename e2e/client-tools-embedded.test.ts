import { describe } from 'vitest';
import { clientToolsConformance } from './client-tools.js';
import { embeddedTarget } from './targets.js';

/** The client's own tools beside the agent's (issue 38), embedded mode. */
describe('client tools, embedded mode', () => {
  clientToolsConformance(embeddedTarget('ctools'));
});
