import type { Command } from 'commander';
import type { AgentHeartbeat, HeartbeatSettings } from '@agentry/client';
import { UsageError } from '../errors.js';
import { examples, type Cli } from '../command-kit.js';
import type { Context } from '../context.js';

interface HeartbeatOpts {
  every?: string;
  prompt?: string;
  hours?: string;
  tz?: string;
  target?: string;
  off?: boolean;
}

/** `agentry agents heartbeat <id>`: show it, change some of its fields, or turn it off. */
export function heartbeatCommand(agents: Command, cli: Cli): void {
  const hb = agents
    .command('heartbeat')
    .description(
      'Show or set the agent\'s heartbeat: a self-prompt every interval within the active hours. An answer of\n' +
        'only HEARTBEAT_OK sends nothing; anything else goes to the target and stays in the heartbeat session.\n' +
        'Options change only what they name (the rest is kept); without options it is shown.',
    )
    .argument('<id>', 'agent id')
    .option('--every <interval>', '30s, 5m, 30m, 1h ... (seconds or minutes dividing 60, hours dividing 24)')
    .option('--prompt <text>', 'the self-prompt ("" for the default, which asks for HEARTBEAT_OK when all is well)')
    .option('--hours <start-end>', 'active hours HH:MM-HH:MM (22:00-06:00 crosses midnight); "all" for the whole day')
    .option('--tz <zone>', 'IANA time zone of the hours and the ticks (default UTC)')
    .option('--target <platform:account:chat>', 'where answers other than HEARTBEAT_OK are sent ("" for none)')
    .option('--off', 'remove the heartbeat (its fires stay in the cron history)')
    .action(cli.action(heartbeat));
  examples(hb, 'agentry agents heartbeat support', 'agentry agents heartbeat support --every 30m --hours 09:00-22:00 --tz Europe/Berlin --target chat_d:ops:4242', 'agentry agents heartbeat support --off');
}

/** `HH:MM-HH:MM` as activeHours; `all` as none. */
function parseHours(value: string): HeartbeatSettings['activeHours'] | null {
  if (value === 'all') return null;
  const m = /^(\d{2}:\d{2})-(\d{2}:\d{2})$/.exec(value.trim());
  if (!m) throw new UsageError(`--hours takes HH:MM-HH:MM or all (got "${value}")`);
  return { start: m[1]!, end: m[2]! };
}

/** The current heartbeat with the options applied (an empty string removes the field). */
function merged(current: HeartbeatSettings | null, opts: HeartbeatOpts): HeartbeatSettings {
  // Setting fields turns a disabled heartbeat on again.
  const { disabled: _off, ...kept } = current ?? { interval: '' };
  const next: HeartbeatSettings = { ...kept };
  if (opts.every !== undefined) next.interval = opts.every;
  if (!next.interval) throw new UsageError('this agent has no heartbeat yet: give --every <interval>');
  const set = (key: 'prompt' | 'timezone' | 'target', value: string | undefined) => {
    if (value === undefined) return;
    if (value === '') delete next[key];
    else next[key] = value;
  };
  set('prompt', opts.prompt);
  set('timezone', opts.tz);
  set('target', opts.target);
  if (opts.hours !== undefined) {
    const hours = parseHours(opts.hours);
    if (hours) next.activeHours = hours;
    else delete next.activeHours;
  }
  return next;
}

function describe(id: string, view: AgentHeartbeat): string {
  const hb = view.heartbeat;
  if (!hb) return `agent ${id} has no heartbeat`;
  const hours = hb.activeHours ? `${hb.activeHours.start}-${hb.activeHours.end}` : 'all day';
  const parts = [`every ${hb.interval}`, hours, hb.timezone ?? 'UTC', hb.target ? `to ${hb.target}` : 'kept in the session only'];
  return `heartbeat of ${id}: ${parts.join(', ')}; next tick ${view.nextTickAt ?? '-'}`;
}

async function heartbeat(ctx: Context, opts: HeartbeatOpts, id: string): Promise<void> {
  const changes = opts.every ?? opts.prompt ?? opts.hours ?? opts.tz ?? opts.target;
  if (opts.off) {
    if (changes !== undefined) throw new UsageError('--off takes no other option');
    const answer = await ctx.spin('removing the heartbeat', () => ctx.client.agents.deleteHeartbeat(id));
    return ctx.printer.done(`heartbeat of ${id} removed`, answer);
  }
  const current = await ctx.spin('loading the heartbeat', () => ctx.client.agents.heartbeat(id));
  if (changes === undefined) return ctx.printer.done(describe(id, current), current);
  const updated = await ctx.spin('saving the heartbeat', () => ctx.client.agents.setHeartbeat(id, merged(current.heartbeat, opts)));
  ctx.printer.done(describe(id, updated), updated);
}
