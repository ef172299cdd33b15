/**
 * The `data:` payloads of a server-sent-events body, one per event (comment lines such as
 * `: ping` and other fields are skipped). Self-contained: unit-tested under Node.
 */
export async function* sseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      for (;;) {
        const end = /\r?\n\r?\n/.exec(buffer);
        if (!end) break;
        const block = buffer.slice(0, end.index);
        buffer = buffer.slice(end.index + end[0].length);
        const data = dataOf(block);
        if (data !== null) yield data;
      }
      if (done) {
        const data = dataOf(buffer);
        if (data !== null) yield data;
        return;
      }
    }
  } finally {
    reader.releaseLock();
  }
}

function dataOf(block: string): string | null {
  const lines = block
    .split(/\r?\n/)
    .filter((l) => l.startsWith('data:'))
    .map((l) => l.slice(5).replace(/^ /, ''));
  return lines.length ? lines.join('\n') : null;
}
