import { readMediaFile, type MediaSource } from '@agentry/channels';
import { isAppError } from '@agentry/errors';
import { readWorkspaceFile, type Db, type OutboundMessageRecord } from '@agentry/db';

/** The file to send is gone: not retryable. */
export class MediaError extends Error {}

/**
 * What an image or file message sends: an uploaded key, a file of the media area (`mediaDir`,
 * checked again now: it may have been replaced by a link since it was queued) or a file read from
 * the agent's workspace now.
 */
export async function mediaOf(db: Db, mediaDir: string, m: OutboundMessageRecord): Promise<MediaSource> {
  const fileName = typeof m.payload.fileName === 'string' ? m.payload.fileName : undefined;
  if (typeof m.payload.key === 'string') return fileName ? { key: m.payload.key, fileName } : { key: m.payload.key };
  if (typeof m.payload.media === 'string') {
    const media = m.payload.media;
    const data = await readMediaFile(mediaDir, media).catch((err: unknown) => {
      throw isAppError(err) ? new MediaError(`media area: ${err.message}`) : err;
    });
    return { data, fileName: fileName ?? media.split('/').pop() ?? 'file' };
  }
  const agentId = String(m.payload.agentId ?? '');
  const path = String(m.payload.path ?? '');
  const file = await readWorkspaceFile(db, agentId, path);
  if (!file?.content) throw new MediaError(`no file "${path}" in the workspace of agent "${agentId}" any more`);
  return { data: new Uint8Array(file.content), fileName: fileName ?? path.split('/').pop() ?? 'file' };
}
