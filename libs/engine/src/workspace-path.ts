import { Errors } from '@agentry/errors';

/**
 * Paths inside an agent's workspace: relative to its root, `/`-separated, without `.`, `..`
 * or empty segments. The root itself is `''`.
 */

export const MAX_PATH_LENGTH = 1024;
export const MAX_NAME_LENGTH = 255;

/**
 * Normalises a client's path (`/a/./b/`, `a//b`, `a/x/../b` all become `a/b`) and refuses
 * one that leaves the root (`..` past it), or holds a NUL byte or a backslash: 400.
 */
export function normaliseWorkspacePath(input: string | undefined | null): string {
  const raw = input ?? '';
  if (raw.includes('\0')) throw new Errors.VALIDATION('path must not contain a NUL byte');
  if (raw.includes('\\')) throw new Errors.VALIDATION('path must not contain a backslash');
  const out: string[] = [];
  for (const segment of raw.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') {
      if (out.length === 0) throw new Errors.VALIDATION(`path "${raw}" leaves the workspace`);
      out.pop();
      continue;
    }
    if (segment.length > MAX_NAME_LENGTH) throw new Errors.VALIDATION(`path segment longer than ${MAX_NAME_LENGTH} characters`);
    out.push(segment);
  }
  const path = out.join('/');
  if (path.length > MAX_PATH_LENGTH) throw new Errors.VALIDATION(`path longer than ${MAX_PATH_LENGTH} characters`);
  return path;
}

/** `a/b/c` -> `a/b`; `a` -> `''`. */
export function parentPath(path: string): string {
  const i = path.lastIndexOf('/');
  return i < 0 ? '' : path.slice(0, i);
}

/** `a/b/c` -> `c`. */
export function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

/** `a/b/c` -> [`a`, `a/b`]: the directories above a path, outermost first. */
export function ancestorPaths(path: string): string[] {
  const parts = path.split('/');
  return parts.slice(0, -1).map((_, i) => parts.slice(0, i + 1).join('/'));
}
