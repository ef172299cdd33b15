import { Errors } from '@agentry/errors';
import { unsafeNameCharacter } from '../workspace-path.js';

/**
 * Reads a zip's central directory (the list of entries with their declared sizes) without
 * inflating anything, so that an archive can be judged before a byte of it is expanded.
 */

export interface ZipEntryInfo {
  /** The name as stored (UTF-8). */
  name: string;
  /** Info-ZIP's Unicode path field (0x7075), which some readers prefer over `name`. */
  unicodeName?: string;
  compressedSize: number;
  /** As declared; an entry that expands to more is corrupt or hostile. */
  uncompressedSize: number;
  method: number;
  encrypted: boolean;
  isDir: boolean;
  isSymlink: boolean;
}

const EOCD = 0x06054b50;
const ZIP64_LOCATOR = 0x07064b50;
const ZIP64_EOCD = 0x06064b50;
const CENTRAL = 0x02014b50;
const U16 = 0xffff;
const U32 = 0xffffffff;

function corrupt(detail: string): Error {
  return new Errors.VALIDATION(`not a valid zip archive: ${detail}`);
}

function u64(buf: Buffer, at: number): number {
  const n = buf.readBigUInt64LE(at);
  return n > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(n);
}

/**
 * The entries of a zip. Throws VALIDATION (400) for data that is not a zip, and
 * PAYLOAD_TOO_LARGE (413) as soon as the directory declares more than `maxEntries` entries.
 */
export function readZipDirectory(data: Uint8Array, maxEntries: number): ZipEntryInfo[] {
  const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  let eocd = -1;
  for (let i = buf.length - 22; i >= Math.max(0, buf.length - 22 - 0xffff); i--) {
    if (buf.readUInt32LE(i) === EOCD) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw corrupt('end of central directory not found');
  let count = buf.readUInt16LE(eocd + 10);
  let size = buf.readUInt32LE(eocd + 12);
  let offset = buf.readUInt32LE(eocd + 16);
  if (count === U16 || size === U32 || offset === U32) {
    const locator = eocd - 20;
    if (locator < 0 || buf.readUInt32LE(locator) !== ZIP64_LOCATOR) throw corrupt('zip64 locator missing');
    const at = u64(buf, locator + 8);
    if (at + 56 > buf.length || buf.readUInt32LE(at) !== ZIP64_EOCD) throw corrupt('zip64 end of central directory missing');
    count = u64(buf, at + 32);
    size = u64(buf, at + 40);
    offset = u64(buf, at + 48);
  }
  if (count > maxEntries) throw new Errors.PAYLOAD_TOO_LARGE(`the archive has ${count} entries; at most ${maxEntries} are accepted`);
  if (offset + size > buf.length) throw corrupt('central directory outside the file');

  // Every central header counts, declared or not: some readers (jszip) read on past `count`.
  const entries: ZipEntryInfo[] = [];
  let p = offset;
  for (let i = 0; p + 4 <= buf.length && buf.readUInt32LE(p) === CENTRAL; i++) {
    if (i >= maxEntries) throw new Errors.PAYLOAD_TOO_LARGE(`the archive has more than ${maxEntries} entries`);
    if (p + 46 > buf.length) throw corrupt(`central directory entry ${i} is truncated`);
    const madeBy = buf.readUInt16LE(p + 4) >> 8;
    const flags = buf.readUInt16LE(p + 8);
    const method = buf.readUInt16LE(p + 10);
    let compressedSize = buf.readUInt32LE(p + 20);
    let uncompressedSize = buf.readUInt32LE(p + 24);
    const nameLength = buf.readUInt16LE(p + 28);
    const extraLength = buf.readUInt16LE(p + 30);
    const commentLength = buf.readUInt16LE(p + 32);
    const external = buf.readUInt32LE(p + 38);
    const nameStart = p + 46;
    const extraStart = nameStart + nameLength;
    const next = extraStart + extraLength + commentLength;
    if (next > buf.length) throw corrupt(`central directory entry ${i} is truncated`);
    const name = buf.toString('utf8', nameStart, extraStart);
    let unicodeName: string | undefined;
    for (let q = extraStart; q + 4 <= extraStart + extraLength; ) {
      const id = buf.readUInt16LE(q);
      const len = buf.readUInt16LE(q + 2);
      const body = q + 4;
      if (body + len > extraStart + extraLength) break;
      if (id === 0x0001) {
        let r = body;
        if (uncompressedSize === U32 && r + 8 <= body + len) {
          uncompressedSize = u64(buf, r);
          r += 8;
        }
        if (compressedSize === U32 && r + 8 <= body + len) compressedSize = u64(buf, r);
      } else if (id === 0x7075 && len > 5) {
        unicodeName = buf.toString('utf8', body + 5, body + len);
      }
      q = body + len;
    }
    const unixMode = madeBy === 3 ? external >>> 16 : 0;
    entries.push({
      name,
      ...(unicodeName !== undefined ? { unicodeName } : {}),
      compressedSize,
      uncompressedSize,
      method,
      encrypted: (flags & 1) === 1,
      isDir: name.endsWith('/') || (unixMode & 0o170000) === 0o040000 || (external & 0x10) === 0x10,
      isSymlink: (unixMode & 0o170000) === 0o120000,
    });
    p = next;
  }
  if (entries.length !== count) throw corrupt(`the directory declares ${count} entries but holds ${entries.length}`);
  return entries;
}

/**
 * Why an entry name must not be extracted (zip-slip and friends), or null when it is safe:
 * absolute paths, drive letters, backslashes, NUL bytes, `..` segments, control characters and
 * bidirectional-text controls are refused.
 */
export function unsafeEntryName(name: string): string | null {
  if (name.includes('\0')) return 'contains a NUL byte';
  if (name.includes('\\')) return 'contains a backslash';
  if (name.startsWith('/')) return 'is an absolute path';
  if (/^[A-Za-z]:/.test(name)) return 'names a drive';
  if (name.split('/').includes('..')) return 'leaves the archive root (..)';
  return unsafeNameCharacter(name);
}
