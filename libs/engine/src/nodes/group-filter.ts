import { groupFilterSpec } from '@agentry/definitions';
import { defineNodeType } from './types.js';

/** RuleGo's default, in seconds, also for 0 or less. */
const GROUP_DEFAULT_TIMEOUT_S = 30;

/**
 * Runs several filter nodes of the chain on the message at once (RuleGo's `groupFilter`; only
 * those nodes, not what they connect to) and routes along `True` when any of them says True, or
 * with `allMatches` when all do; otherwise `False`. A node that fails or does not exist counts
 * as not True. Waits for every node to end (the answer may be known sooner), at most `timeout`
 * seconds (default 30), then Failure. An empty `nodeIds` is a Failure, as in RuleGo.
 */
export const groupFilter = defineNodeType({
  ...groupFilterSpec,
  async execute(msg, config, ctx) {
    const raw = config.nodeIds ?? [];
    const ids = (typeof raw === 'string' ? raw.split(',') : raw).map((id) => id.trim()).filter((id) => id !== '');
    if (ids.length === 0) throw new Error('nodeIds is empty');
    const seconds = config.timeout !== undefined && config.timeout > 0 ? config.timeout : GROUP_DEFAULT_TIMEOUT_S;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      // setTimeout fires at once past 2^31 - 1 ms.
      timer = setTimeout(() => reject(new Error(`timed out after ${seconds} s waiting for ${ids.join(', ')}`)), Math.min(seconds * 1000, 2 ** 31 - 1));
    });
    const verdicts = Promise.all(ids.map((id) => ctx.runNode(id, msg).then((r) => r.relations.includes('True'), () => false)));
    try {
      const said = await Promise.race([verdicts, timeout]);
      const pass = config.allMatches ? said.every(Boolean) : said.some(Boolean);
      return { msg, relation: pass ? 'True' : 'False' };
    } finally {
      clearTimeout(timer);
    }
  },
});
