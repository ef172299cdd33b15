import JSZip from 'jszip';
import { Errors } from '@agentry/errors';
import { MAX_SKILL_BYTES, SKILL_NAME_REGEX, SkillFormatError, parseSkillMarkdown } from './markdown.js';
import { readZipDirectory, unsafeEntryName, type ZipEntryInfo } from './zip.js';

interface SkillArchiveLimits {
  /** Entries in the central directory (files and folders). */
  maxEntries: number;
  /** Sum of the declared uncompressed sizes of all entries. */
  maxUncompressedBytes: number;
  /** One skill file, expanded. */
  maxSkillBytes: number;
}

const SKILL_ARCHIVE_LIMITS: SkillArchiveLimits = {
  maxEntries: 1000,
  maxUncompressedBytes: 200 * 1024 * 1024,
  maxSkillBytes: MAX_SKILL_BYTES,
};

interface ArchiveSkill {
  name: string;
  description: string;
  content: string;
  status: 'active' | 'draft';
  /** The archive entry it came from. */
  entry: string;
}

interface SkippedEntry {
  entry: string;
  reason: string;
}

interface SkillArchive {
  skills: ArchiveSkill[];
  skipped: SkippedEntry[];
}

interface Candidate {
  entry: ZipEntryInfo;
  /** Name the file implies (its folder, or its stem at the top level); front matter may override. */
  impliedName: string | undefined;
  status: 'active' | 'draft';
}

/** `<name>/SKILL.md` (active), `<name>/DRAFT.md` (draft) or a top-level `<name>.md`. */
function classify(entry: ZipEntryInfo): Candidate | string {
  const parts = entry.name.split('/');
  const file = parts[parts.length - 1] ?? '';
  if (parts.length === 2 && (file === 'SKILL.md' || file === 'DRAFT.md')) {
    return { entry, impliedName: parts[0], status: file === 'DRAFT.md' ? 'draft' : 'active' };
  }
  if (parts.length === 1 && /\.md$/i.test(file)) {
    const stem = file.replace(/\.md$/i, '');
    return { entry, impliedName: stem === 'SKILL' || stem === 'DRAFT' ? undefined : stem, status: 'active' };
  }
  return 'not a skill file (expected <name>/SKILL.md or a top-level <name>.md)';
}

/** Inflates one entry, refusing to produce more than `cap` bytes (a lying header cannot bomb). */
function inflateCapped(file: JSZip.JSZipObject, cap: number): Promise<Buffer | 'too-large'> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let settled = false;
    const stream = file.nodeStream('nodebuffer');
    stream.on('data', (chunk: Buffer) => {
      if (settled) return;
      total += chunk.length;
      if (total > cap) {
        settled = true;
        stream.pause();
        stream.removeAllListeners('data');
        resolve('too-large');
        return;
      }
      chunks.push(chunk);
    });
    stream.on('error', (err: unknown) => {
      if (settled) return;
      settled = true;
      reject(err instanceof Error ? err : new Error(String(err)));
    });
    stream.on('end', () => {
      if (settled) return;
      settled = true;
      resolve(Buffer.concat(chunks));
    });
  });
}

/**
 * Reads the skills of a zip archive. Everything that could make the archive dangerous is
 * judged from its central directory before anything is inflated, and the whole archive is
 * refused (nothing is returned, so nothing gets written):
 * - 400 for a damaged archive, a zip-slip name (`..`, absolute, drive, backslash, NUL), a
 *   symbolic link, two entries of the same name, or an entry expanding beyond its declared size;
 * - 413 for more than `maxEntries` entries or more than `maxUncompressedBytes` declared in total.
 * Files that are simply not usable skills are listed in `skipped` with the reason.
 */
export async function readSkillArchive(data: Uint8Array, limits: SkillArchiveLimits = SKILL_ARCHIVE_LIMITS): Promise<SkillArchive> {
  const entries = readZipDirectory(data, limits.maxEntries);
  const names = checkDirectory(entries, limits);
  const byName = await openChecked(data, entries, names);
  const skipped: SkippedEntry[] = [];
  const found = new Map<string, ArchiveSkill>();
  for (const entry of entries) {
    if (entry.isDir) continue;
    const skill = await readEntry(entry, byName, limits);
    if (typeof skill === 'string') skipped.push({ entry: entry.name, reason: skill });
    else keepSkill(found, skipped, skill);
  }
  return { skills: [...found.values()], skipped };
}

type DirectoryEntry = ReturnType<typeof readZipDirectory>[number];

/** The entries' names, once the directory shows nothing dangerous (names, links, duplicates, declared size). */
function checkDirectory(entries: DirectoryEntry[], limits: SkillArchiveLimits): Set<string> {
  const names = new Set<string>();
  let declared = 0;
  for (const entry of entries) {
    for (const name of [entry.name, entry.unicodeName]) {
      if (name === undefined) continue;
      const unsafe = unsafeEntryName(name);
      if (unsafe) throw new Errors.VALIDATION(`archive entry "${name}" ${unsafe}`);
    }
    if (entry.isSymlink) throw new Errors.VALIDATION(`archive entry "${entry.name}" is a symbolic link`);
    if (names.has(entry.name)) throw new Errors.VALIDATION(`the archive has two entries named "${entry.name}"`);
    names.add(entry.name);
    declared += entry.uncompressedSize;
  }
  if (declared > limits.maxUncompressedBytes) {
    throw new Errors.PAYLOAD_TOO_LARGE(
      `the archive expands to ${declared} bytes; at most ${limits.maxUncompressedBytes} are accepted`,
    );
  }
  return names;
}

/** The archive's files as jszip reads them, by original name; each must be one the directory check saw. */
async function openChecked(data: Uint8Array, entries: DirectoryEntry[], names: Set<string>): Promise<Map<string, JSZip.JSZipObject>> {
  let zip: JSZip;
  try {
    zip = await JSZip.loadAsync(data);
  } catch (err) {
    throw new Errors.VALIDATION(`not a valid zip archive: ${(err as Error).message}`);
  }
  // What jszip hands out must be what was checked above (it reads names its own way).
  const checked = new Set([...names, ...entries.flatMap((e) => (e.unicodeName === undefined ? [] : [e.unicodeName]))]);
  const byName = new Map<string, JSZip.JSZipObject>();
  for (const file of Object.values(zip.files)) {
    if (file.dir) continue;
    const original = file.unsafeOriginalName ?? file.name;
    if (!checked.has(original)) throw new Errors.VALIDATION(`archive entry "${original}" is not what its directory says`);
    byName.set(original, file);
  }
  return byName;
}

/** One file entry as a skill, or why it is skipped; throws for a damaged entry (the whole archive is refused). */
async function readEntry(entry: DirectoryEntry, byName: Map<string, JSZip.JSZipObject>, limits: SkillArchiveLimits): Promise<ArchiveSkill | string> {
  const candidate = classify(entry);
  if (typeof candidate === 'string') return candidate;
  if (entry.encrypted) return 'encrypted';
  if (entry.method !== 0 && entry.method !== 8) return `unsupported compression method ${entry.method}`;
  if (entry.uncompressedSize > limits.maxSkillBytes) return `larger than ${limits.maxSkillBytes} bytes`;
  const text = await entryText(entry, byName);
  if (text === undefined) return 'not UTF-8 text';
  let parsed;
  try {
    parsed = parseSkillMarkdown(text);
  } catch (err) {
    if (!(err instanceof SkillFormatError)) throw err;
    return err.message;
  }
  const name = parsed.name || candidate.impliedName;
  if (!name) return 'no name (give one in the front matter)';
  if (!SKILL_NAME_REGEX.test(name)) return `invalid skill name "${name}" (letters, digits, _ and -, 1 to 64)`;
  return { name, description: parsed.description ?? '', content: parsed.body, status: candidate.status, entry: entry.name };
}

/** The entry inflated (never past its declared size) and decoded; undefined when it is not UTF-8. */
async function entryText(entry: DirectoryEntry, byName: Map<string, JSZip.JSZipObject>): Promise<string | undefined> {
  const file = byName.get(entry.unicodeName ?? entry.name) ?? byName.get(entry.name);
  if (!file) throw new Errors.VALIDATION(`archive entry "${entry.name}" could not be read`);
  let bytes: Buffer | 'too-large';
  try {
    bytes = await inflateCapped(file, entry.uncompressedSize);
  } catch (err) {
    throw new Errors.VALIDATION(`archive entry "${entry.name}" is damaged: ${(err as Error).message}`);
  }
  if (bytes === 'too-large') {
    throw new Errors.VALIDATION(`archive entry "${entry.name}" expands beyond its declared ${entry.uncompressedSize} bytes`);
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

/** Adds a skill, or settles a second one of the same name: a DRAFT.md beside a SKILL.md wins, otherwise the first. */
function keepSkill(found: Map<string, ArchiveSkill>, skipped: SkippedEntry[], skill: ArchiveSkill): void {
  const { name } = skill;
  const previous = found.get(name);
  if (!previous) {
    found.set(name, skill);
    return;
  }
  // As in TpClaw, a DRAFT.md takes precedence over the SKILL.md beside it.
  const [kept, dropped] = previous.status === 'active' && skill.status === 'draft' ? [skill, previous] : [previous, skill];
  found.set(name, kept);
  skipped.push({
    entry: dropped.entry,
    reason: kept.status === 'draft' && dropped.status === 'active' ? `DRAFT.md takes precedence for skill "${name}"` : `duplicate skill name "${name}"`,
  });
}
