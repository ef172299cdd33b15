import type { Static } from 'typebox';
import { writeWorkspaceFile } from '@agentry/db';
import { ToolError } from '../types.js';
import { writeSpec } from '@agentry/definitions';
import { checkArgs, fileSizeLimit, checkConfig, dbCall, entryPath, modifyFile, plural, workspaceQuota, type BuiltinTool } from './common.js';

const Parameters = writeSpec.parameters;
type Args = Static<typeof Parameters>;

const Config = writeSpec.configSchema;
type Config = Static<typeof Config>;

export const writeTool: BuiltinTool = {
  ...writeSpec,
  async run(raw, ctx) {
    const args = checkArgs<Args>('write', Parameters, raw);
    const cfg = checkConfig<Config>('write', Config, ctx.config);
    const path = entryPath(args.path);
    const max = fileSizeLimit(cfg.maxFileSize, ctx);
    const bytes = Buffer.from(args.content, 'utf8');
    const tooBig = (size: number) =>
      new ToolError(`the file would be ${plural(size, 'byte')}; workspace files are limited to ${plural(max, 'byte')}`);
    const mode = args.mode ?? 'create';
    const quota = await workspaceQuota(ctx);

    if (mode === 'append') {
      return modifyFile(
        ctx.db,
        ctx.agentId,
        path,
        async (current) => {
          const next = current ? Buffer.concat([current, bytes]) : bytes;
          if (next.byteLength > max) throw tooBig(next.byteLength);
          const result = current
            ? `Appended ${plural(bytes.byteLength, 'byte')} to "${path}" (now ${plural(next.byteLength, 'byte')}).`
            : `Created "${path}" (${plural(next.byteLength, 'byte')}).`;
          return { bytes: next, result };
        },
        (trx, next) => writeWorkspaceFile(trx, ctx.agentId, path, next, 'overwrite', quota),
      );
    }

    if (bytes.byteLength > max) throw tooBig(bytes.byteLength);
    if (mode === 'create') {
      try {
        await dbCall(() => writeWorkspaceFile(ctx.db, ctx.agentId, path, bytes, 'create', quota));
      } catch (err) {
        if (err instanceof ToolError && /already exists/.test(err.message)) {
          throw new ToolError(`"${path}" already exists; use mode "overwrite" to replace it, "append" to add to it, or the edit tool to change part of it`);
        }
        throw err;
      }
      return `Created "${path}" (${plural(bytes.byteLength, 'byte')}).`;
    }
    const { created } = await dbCall(() => writeWorkspaceFile(ctx.db, ctx.agentId, path, bytes, 'overwrite', quota));
    return `${created ? 'Created' : 'Overwrote'} "${path}" (${plural(bytes.byteLength, 'byte')}).`;
  },
};
