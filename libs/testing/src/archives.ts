import { crc32, createDeflateRaw } from 'node:zlib';

/**
 * Hostile and ordinary upload bodies shared by the gateway's tests and the e2e attack suite:
 * multipart bodies, zips written byte by byte (headers that lie, names and modes a zip library
 * refuses to write) and deflate streams of zeros (zip bombs) built without holding them expanded.
 */

/** A multipart/form-data body built by hand (no form-data dependency). */
export function multipart(parts: Array<{ name: string; value: string | Buffer; filename?: string; contentType?: string }>): {
  payload: Buffer;
  headers: Record<string, string>;
} {
  const boundary = `----agentry${Math.random().toString(16).slice(2)}`;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"`;
    if (part.filename !== undefined) head += `; filename="${part.filename}"`;
    head += '\r\n';
    if (part.filename !== undefined) head += `Content-Type: ${part.contentType ?? 'application/zip'}\r\n`;
    chunks.push(Buffer.from(`${head}\r\n`), Buffer.isBuffer(part.value) ? part.value : Buffer.from(part.value), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { payload: Buffer.concat(chunks), headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

export interface RawZipEntry {
  name: string;
  /** The bytes as stored (already deflated when method is 8). */
  data: Buffer;
  method?: 0 | 8;
  /** Declared uncompressed size (default: data.length, right for stored entries). */
  size?: number;
  crc?: number;
  /** Unix mode (made-by UNIX) when given, e.g. 0o120777 for a symbolic link. */
  unixMode?: number;
}

/**
 * A zip written byte by byte, so tests can declare what they like in the headers (sizes that
 * lie, names jszip would refuse to write) without ever holding the expanded data.
 */
export function rawZip(entries: RawZipEntry[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const name = Buffer.from(e.name, 'utf8');
    const method = e.method ?? 0;
    const size = e.size ?? e.data.length;
    const crc = e.crc ?? (method === 0 ? crc32(e.data) : 0);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x0800, 6); // UTF-8 names
    local.writeUInt16LE(method, 8);
    local.writeUInt32LE(crc >>> 0, 14);
    local.writeUInt32LE(e.data.length, 18);
    local.writeUInt32LE(size, 22);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(e.unixMode !== undefined ? (3 << 8) | 20 : 20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x0800, 8);
    central.writeUInt16LE(method, 10);
    central.writeUInt32LE(crc >>> 0, 16);
    central.writeUInt32LE(e.data.length, 20);
    central.writeUInt32LE(size, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(e.unixMode !== undefined ? (e.unixMode << 16) >>> 0 : 0, 38);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, e.data);
    centrals.push(central, name);
    offset += local.length + name.length + e.data.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}

/** Deflated zeros, produced in 1 MiB steps: the test never holds the expanded bytes. */
export async function deflatedZeros(bytes: number): Promise<Buffer> {
  const deflate = createDeflateRaw({ level: 9 });
  const out: Buffer[] = [];
  deflate.on('data', (c: Buffer) => out.push(c));
  const done = new Promise<void>((resolve, reject) => {
    deflate.on('end', resolve);
    deflate.on('error', reject);
  });
  const chunk = Buffer.alloc(1024 * 1024);
  for (let left = bytes; left > 0; left -= chunk.length) {
    if (!deflate.write(left >= chunk.length ? chunk : chunk.subarray(0, left))) await new Promise((r) => deflate.once('drain', r));
  }
  deflate.end();
  await done;
  return Buffer.concat(out);
}
