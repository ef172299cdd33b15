import { createMemoryBus } from '../src/index.js';
import { runBusContract } from './contract.js';

runBusContract('memory', async ({ logger }) => createMemoryBus({ logger }));
