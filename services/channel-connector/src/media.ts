import type { MediaSource } from '@agentry/channels';
import { readWorkspaceFile, type Db, type OutboundMessageRecord } from '@agentry/db';

/** The file to send is gone: not retryable. */
export class MediaError extends Error {}

/** What an image or file message sends: an uploaded key, or the file read from the agent's workspace now. */
export async function mediaOf(db: Db, m: OutboundMessageRecord): Promise<MediaSource> {
  const fileName = typeof m.payload.fileName === 'string' ? m.payload.fileName : undefined;
  if (typeof m.payload.key === 'string') return fileName ? { key: m.payload.key, fileName } : { key: m.payload.key };
  const agentId = String(m.payload.agentId ?? '');
  const path = String(m.payload.path ?? '');
  const file = await readWorkspaceFile(db, agentId, path);
  if (!file?.content) throw new MediaError(`no file "${path}" in the workspace of agent "${agentId}" any more`);
  return { data: new Uint8Array(file.content), fileName: fileName ?? path.split('/').pop() ?? 'file' };
}
