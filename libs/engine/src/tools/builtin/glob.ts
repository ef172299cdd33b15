import type { Static } from 'typebox';
import { getWorkspaceEntry } from '@agentry/db';
import { GlobSyntaxError, compileGlob } from '../glob-match.js';
import { ToolError } from '../types.js';
import { globSpec } from '@agentry/definitions';
import { checkArgs, checkConfig, listTree, plural, toolPath, type BuiltinTool } from './common.js';

const Parameters = globSpec.parameters;
type Args = Static<typeof Parameters>;

const Config = globSpec.configSchema;
type Config = Static<typeof Config>;

export const globTool: BuiltinTool = {
  ...globSpec,
  async run(raw, ctx) {
    const args = checkArgs<Args>('glob', Parameters, raw);
    const cfg = checkConfig<Config>('glob', Config, ctx.config);
    const limit = Math.min(args.head_limit ?? cfg.maxResults ?? 200, cfg.hardMaxLimit ?? 1000);
    const dir = toolPath(args.path);
    let matches: (path: string) => boolean;
    try {
      matches = compileGlob(args.pattern.replace(/^\.\//, ''));
    } catch (err) {
      if (err instanceof GlobSyntaxError) throw new ToolError(`pattern: ${err.message}`);
      throw err;
    }
    if (args.pattern.startsWith('/')) throw new ToolError('pattern is absolute; it is matched relative to path (the workspace root by default)');
    if (dir !== '') {
      const entry = await getWorkspaceEntry(ctx.db, ctx.agentId, dir);
      if (!entry) throw new ToolError(`directory "${dir}" not found`);
      if (!entry.isDir) throw new ToolError(`"${dir}" is a file, not a directory`);
    }
    const prefix = dir === '' ? '' : `${dir}/`;
    const found = (await listTree(ctx.db, ctx.agentId, dir)).filter((e) => !e.isDir && matches(e.path.slice(prefix.length))).map((e) => e.path);
    const where = dir === '' ? 'the workspace' : `"${dir}"`;
    if (found.length === 0) return `No file matches "${args.pattern}" in ${where}.`;
    const more = found.length > limit ? `\n[... ${plural(found.length - limit, 'more file')} not shown (limit ${limit}); narrow the pattern]` : '';
    return `${found.slice(0, limit).join('\n')}${more}`;
  },
};
