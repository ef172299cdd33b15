/** Whole lists in the browser: filtering and telling titles apart. Pure: unit-tested under Node. */

/** Items whose text (any of `fields`) contains every word of `query`, any case. */
export function filterItems<T>(items: T[], query: string, fields: (item: T) => Array<string | undefined | null>): T[] {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  if (words.length === 0) return items;
  return items.filter((item) => {
    const text = fields(item).filter(Boolean).join(' ').toLowerCase();
    return words.every((w) => text.includes(w));
  });
}

/**
 * A title as text: a conversation is titled by its first message, which is often Markdown
 * (`**Fix** the \`build\``, `# Plan`, `[docs](https://...)`); the list shows what it says, not its markup.
 */
export function plainTitle(text: string): string {
  return text
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/^\s*(?:#{1,6}|>|[-*+]|\d+[.)])\s+/gm, '')
    .replace(/(\*\*|__|~~)(.+?)\1/g, '$2')
    .replace(/(^|[\s(])[*_]([^*_\s][^*_]*?)[*_](?=[\s).,!?:;]|$)/g, '$1$2')
    .replace(/`+([^`]*)`+/g, '$1')
    .replace(/\s+/g, ' ')
    .trim();
}

/**
 * Titles that tell conversations apart: the first words of the title (or the key), and the
 * time it was last active when two would read the same.
 */
export function distinctTitles<T extends { id: string; title: string; sessionKey: string; updatedAt: string }>(sessions: T[], fmt: (iso: string) => string): Map<string, string> {
  const short = (s: T) => {
    const words = (plainTitle(s.title) || s.sessionKey).trim().split(/\s+/);
    return words.length > 8 ? `${words.slice(0, 8).join(' ')}…` : words.join(' ');
  };
  const seen = new Map<string, number>();
  for (const s of sessions) seen.set(short(s), (seen.get(short(s)) ?? 0) + 1);
  return new Map(sessions.map((s) => [s.id, (seen.get(short(s)) ?? 0) > 1 ? `${short(s)} · ${fmt(s.updatedAt)}` : short(s)]));
}
