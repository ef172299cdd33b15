/** PGlite's protocol entry point, through which the dialect sends every statement (libs/db/src/pglite-dialect.ts). */
type ExecProtocolStream = (message: Uint8Array, options?: unknown) => Promise<unknown>;

/**
 * Calls `onStatement` with the SQL of each statement PGlite executes (each Execute message; a
 * named statement's Bind resolved to its earlier Parse), by wrapping the prototype's protocol
 * entry point; returns the function that unwraps it. `PGlite` is passed in so that this package
 * does not depend on PGlite. Counts for tests and benches; never times.
 */
export function tracePgliteStatements(PGlite: { prototype: object }, onStatement: (sql: string) => void): () => void {
  const proto = PGlite.prototype as { execProtocolStream: ExecProtocolStream };
  const own = Object.getOwnPropertyDescriptor(proto, 'execProtocolStream');
  const original = proto.execProtocolStream;
  const named = new Map<string, string>();
  const cstring = (bytes: Uint8Array, at: number): [string, number] => {
    const end = bytes.indexOf(0, at);
    return [Buffer.from(bytes.subarray(at, end)).toString('utf8'), end + 1];
  };
  proto.execProtocolStream = function (this: unknown, message, options) {
    const view = new DataView(message.buffer, message.byteOffset, message.byteLength);
    let current = '';
    for (let at = 0; at < message.length; ) {
      const type = String.fromCharCode(message[at]!);
      const body = at + 5;
      if (type === 'P') {
        const [name, next] = cstring(message, body);
        [current] = cstring(message, next);
        if (name) named.set(name, current);
      } else if (type === 'B') {
        const [, next] = cstring(message, body);
        const [statement] = cstring(message, next);
        if (statement) current = named.get(statement) ?? `(statement ${statement})`;
      } else if (type === 'E') {
        onStatement(current.replace(/\s+/g, ' ').trim());
      }
      at += 1 + view.getInt32(at + 1);
    }
    return original.call(this, message, options);
  };
  return () => {
    if (own) Object.defineProperty(proto, 'execProtocolStream', own);
    else delete (proto as Partial<typeof proto>).execProtocolStream;
  };
}
