import { Errors } from '@agentry/errors';

/**
 * Paths inside an agent's workspace: relative to its root, `/`-separated, without `.`, `..`
 * or empty segments. The root itself is `''`.
 */

const MAX_PATH_LENGTH = 1024;
const MAX_NAME_LENGTH = 255;

/**
 * Characters no name may hold: control characters (C0, DEL, C1), line and paragraph separators,
 * and the bidirectional-text controls that make `evil\u202Etxt.exe` display as `evilexe.txt`.
 */
const UNSAFE_CHARACTER = /[\p{Cc}\u061C\u200E\u200F\u2028\u2029\u202A-\u202E\u2066-\u2069]/u;

/** Why `name` may not be used as a file name (the first unsafe character), or null. */
export function unsafeNameCharacter(name: string): string | null {
  const m = UNSAFE_CHARACTER.exec(name);
  if (!m) return null;
  const code = `U+${m[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
  return /\p{Cc}/u.test(m[0]) ? `contains the control character ${code}` : `contains ${code}, a character that changes how text is displayed (bidirectional control or line separator)`;
}

/**
 * Normalises a client's path (`/a/./b/`, `a//b`, `a/x/../b` all become `a/b`) and refuses
 * one that leaves the root (`..` past it), or holds a NUL byte, a backslash, a control or a
 * bidirectional-text character: 400. Names are Unicode NFC, so that an "Å" typed as one code
 * point and one composed of "A" and a ring name the same file.
 */
export function normaliseWorkspacePath(input: string | undefined | null): string {
  const raw = (input ?? '').normalize('NFC');
  if (raw.includes('\0')) throw new Errors.VALIDATION('path must not contain a NUL byte');
  if (raw.includes('\\')) throw new Errors.VALIDATION('path must not contain a backslash');
  const unsafe = unsafeNameCharacter(raw);
  if (unsafe) throw new Errors.VALIDATION(`path ${unsafe}; file and directory names may not contain such characters`);
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
