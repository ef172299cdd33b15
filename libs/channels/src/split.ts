/**
 * Splits `text` into parts of at most `limit` characters (UTF-16 code units, as platforms count),
 * preferring paragraph breaks, then line breaks, then spaces, and never cutting a surrogate pair.
 * Whitespace at the cut is dropped; nothing else is lost or reordered.
 */
export function splitText(text: string, limit: number): string[] {
  if (limit < 2) throw new RangeError('limit must be at least 2');
  const parts: string[] = [];
  let rest = text;
  while (rest.length > limit) {
    const window = rest.slice(0, limit + 1);
    let cut = lastBreak(window, '\n\n', limit);
    if (cut <= 0) cut = lastBreak(window, '\n', limit);
    if (cut <= 0) cut = lastBreak(window, ' ', limit);
    if (cut <= 0) {
      cut = limit;
      const code = rest.charCodeAt(cut - 1);
      if (code >= 0xd800 && code <= 0xdbff) cut -= 1;
    }
    const part = rest.slice(0, cut).replace(/\s+$/, '');
    if (part) parts.push(part);
    rest = rest.slice(cut).replace(/^\s+/, '');
  }
  if (rest || parts.length === 0) parts.push(rest);
  return parts;
}

/** Index of the last `sep` that ends a part no longer than `limit`, or -1. */
function lastBreak(window: string, sep: string, limit: number): number {
  const at = window.lastIndexOf(sep, limit);
  return at > limit / 4 ? at : -1;
}
