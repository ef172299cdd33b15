import { end } from '../../nodes/end.js';
import { defineExecutor } from '../types.js';

/** Ends the branch; the message here is a result of the run. */
export const endExecutor = defineExecutor(end, async (msg) => ({ msg, relations: [] }));
