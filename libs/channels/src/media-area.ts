import { open, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { Errors } from '@agentry/errors';

/**
 * The media area: `<data root_dir>/media/`, the one host folder the send-image and send-file
 * routes may read (the gateway checks the file when the message is queued, the connector reads it
 * when it sends; in cluster mode both mount the same data folder). A request names a file inside
 * it by a relative path; nothing outside it can be named, through `..`, an absolute path or a
 * symlink.
 */
export const MEDIA_DIR_NAME = 'media';

/** The most a platform takes in one message (Telegram's bot upload limit is 50 MB; most are lower). */
export const MEDIA_MAX_BYTES = 20 * 1024 * 1024;

export function mediaDirOf(rootDir: string): string {
  return path.join(rootDir, MEDIA_DIR_NAME);
}

/**
 * The path as stored in an outbound message (`a/b.png`), or a 400 naming what is wrong. The path
 * is taken literally: JSON bodies are not URL-decoded, so `%2e%2e` is a name, not `..`.
 */
export function normaliseMediaPath(input: string, field: string): string {
  if (input.includes('\0')) throw new Errors.VALIDATION(`${field}: must not contain a NUL byte`);
  if (input.includes('\\')) throw new Errors.VALIDATION(`${field}: must not contain a backslash (use /)`);
  if (input.startsWith('/') || /^[A-Za-z]:/.test(input)) {
    throw new Errors.VALIDATION(`${field}: "${input}" is an absolute path; name a file relative to the media area (${MEDIA_DIR_NAME}/ in the data folder)`);
  }
  const segments = input.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) throw new Errors.VALIDATION(`${field}: "${input}" leaves the media area (".." is not allowed)`);
  if (segments.length === 0) throw new Errors.VALIDATION(`${field}: name a file, not the media area itself`);
  return segments.join('/');
}

/**
 * The real path of a regular file of the media area no larger than `maxBytes`. Symlinks are
 * followed, but the file they reach must still be inside the area: a link pointing out is refused
 * like `..`. Missing files are 404.
 */
export async function resolveMediaFile(mediaDir: string, rel: string, field: string, maxBytes = MEDIA_MAX_BYTES): Promise<{ file: string; size: number }> {
  const normal = normaliseMediaPath(rel, field);
  const root = await realpath(mediaDir).catch(() => null);
  if (root === null) throw new Errors.NOT_FOUND(`file "${normal}" in the media area (the data folder has no ${MEDIA_DIR_NAME}/ folder)`);
  const file = await realpath(path.join(root, normal)).catch(() => null);
  if (file === null) throw new Errors.NOT_FOUND(`file "${normal}" in the media area`);
  if (!file.startsWith(root + path.sep)) throw new Errors.VALIDATION(`${field}: "${normal}" is a link leading out of the media area`);
  const info = await stat(file);
  if (!info.isFile()) throw new Errors.VALIDATION(`${field}: "${normal}" is not a file`);
  if (info.size > maxBytes) throw new Errors.VALIDATION(`${field}: "${normal}" is ${megabytes(info.size)} MB, more than the ${megabytes(maxBytes)} MB a message may carry`);
  return { file, size: info.size };
}

/** The file's bytes, checked again as when it was queued (it may have changed since). */
export async function readMediaFile(mediaDir: string, rel: string, maxBytes = MEDIA_MAX_BYTES): Promise<Uint8Array> {
  const { file } = await resolveMediaFile(mediaDir, rel, 'media', maxBytes);
  const handle = await open(file, 'r');
  try {
    // Read through the handle, bounded: a file grown since the check cannot exceed the limit.
    const size = (await handle.stat()).size;
    if (size > maxBytes) throw new Errors.VALIDATION(`media: "${rel}" is ${megabytes(size)} MB, more than the ${megabytes(maxBytes)} MB a message may carry`);
    const buf = Buffer.alloc(size);
    const { bytesRead } = await handle.read(buf, 0, size, 0);
    return new Uint8Array(buf.buffer, buf.byteOffset, bytesRead);
  } finally {
    await handle.close();
  }
}

function megabytes(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(1).replace(/\.0$/, '');
}
