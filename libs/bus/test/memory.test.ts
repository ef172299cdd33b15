import { createMemoryBus } from '../src/index.js';
import { runBusContract, type TestChannels, type TestQueues } from './contract.js';

runBusContract('memory', async ({ logger }) => createMemoryBus<TestQueues, TestChannels>({ logger }));
