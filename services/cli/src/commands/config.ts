import type { Command } from 'commander';
import { CliError, UsageError } from '../errors.js';
import { examples, type Cli } from '../command-kit.js';

/** `a.b.c` of a nested object; undefined when a part is missing. */
export function pick(value: unknown, key: string): unknown {
  let node = value;
  for (const part of key.split('.')) {
    if (!node || typeof node !== 'object' || !(part in node)) return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

/** `a.b.c` = v as `{a: {b: {c: v}}}`. */
export function nest(key: string, value: unknown): Record<string, unknown> {
  const parts = key.split('.');
  if (parts.some((p) => p === '')) throw new UsageError(`"${key}" is not a key (expected something like server.port)`);
  return parts.reduceRight<unknown>((inner, part) => ({ [part]: inner }), value) as Record<string, unknown>;
}

/** A value as typed: JSON when it parses (9600, true, null, {"a":1}), else the text itself. */
export function parseValue(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function show(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value, null, 2);
}

export function configCommands(program: Command, cli: Cli): void {
  const config = program
    .command('config')
    .summary('read and change the server configuration')
    .description('The live server configuration (secrets are never shown). Changes reach every replica within a second.');
  examples(config, 'agentry config get', 'agentry config get server.port', 'agentry config set security.requireAuth true');

  const get = config
    .command('get')
    .alias('show')
    .description('Print the configuration, or one key of it (a.b.c).')
    .argument('[key]', 'dotted key, e.g. models.default_provider')
    .action(
      cli.action(async (ctx, _opts, key: string | undefined) => {
        const view = await ctx.spin('loading the configuration', () => ctx.client.config.get());
        const value = key ? pick(view, key) : view;
        if (value === undefined) throw new CliError(`the configuration has no key ${key}`);
        if (ctx.json) return ctx.printer.json(value);
        ctx.printer.text(`${show(value)}\n`);
      }),
    );
  examples(get, 'agentry config get', 'agentry config get models.default_provider', 'agentry config get security --json');

  const set = config
    .command('set')
    .alias('update')
    .description('Change one editable key; the value is JSON when it parses as JSON (9600, true), else text.')
    .argument('<key>', 'dotted key: server.host, server.port, models.default_provider, security.requireAuth, ...')
    .argument('<value>', 'the new value')
    .action(
      cli.action(async (ctx, _opts, key: string, raw: string) => {
        const view = await ctx.spin('saving', () => ctx.client.config.update(nest(key, parseValue(raw))));
        const now = pick(view, key);
        ctx.printer.done(`${key} = ${now === undefined ? raw : show(now)}`, view);
      }),
    );
  examples(set, 'agentry config set server.port 9600', 'agentry config set models.default_provider openai', 'agentry config set security.requireAuth true');
}
