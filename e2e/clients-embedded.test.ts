import { describe } from 'vitest';
import { clientsConformance } from './clients-conformance.js';
import { responsesClientsConformance } from './clients-responses.js';
import { pythonClientsConformance } from './python-clients.js';
import { embeddedTarget } from './targets.js';

/** Third-party clients against embedded mode: one process, PGlite, the in-process bus. */
describe('third-party clients, embedded mode', () => {
  const target = embeddedTarget('clients');
  clientsConformance(target);
  responsesClientsConformance(target);
  pythonClientsConformance(target);
});
