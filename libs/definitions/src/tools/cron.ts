import Type from 'typebox';
import { StringEnum } from './schema.js';
import { defineToolSpec } from './types.js';

const Parameters = Type.Object(
  {
    operation: StringEnum(['list', 'create', 'toggle'], {
      description: 'list: your cron jobs; create: a new job; toggle: enable or disable a job',
    }),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'create: a short name for the job' })),
    schedule: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 256,
        description: 'create: six cron fields "second minute hour day month weekday", e.g. "0 0 9 * * 1-5" = 09:00 on weekdays',
      }),
    ),
    message: Type.Optional(Type.String({ minLength: 1, maxLength: 100_000, description: 'create: the message you receive when the job fires' })),
    timezone: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'create: IANA time zone of the schedule (default UTC)' })),
    id: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'toggle: the job id (from list)' })),
    disabled: Type.Optional(Type.Boolean({ description: 'toggle: true disables, false enables (default: flip the current state)' })),
  },
  { additionalProperties: false },
);

const Config = Type.Object({
  maxJobs: Type.Optional(Type.Integer({ minimum: 0, description: 'most jobs the agent may have (default 20)' })),
  minIntervalSeconds: Type.Optional(Type.Integer({ minimum: 1, description: 'shortest time between two ticks of a schedule created here (default 60)' })),
});

/** The `cron` built-in tool as a definition sees it: its name, arguments and per-agent config. */
export const cronSpec = defineToolSpec({
  name: 'cron',
  description:
    'Manage your scheduled (cron) jobs. Each job sends you its message at every tick of its schedule, and you act on it then. ' +
    'operation "list" shows your jobs; "create" adds one (name, schedule, message, optional timezone); "toggle" enables or disables one by id. ' +
    'Schedules have six fields: second minute hour day month weekday.',
  parameters: Parameters,
  configSchema: Config,
});
