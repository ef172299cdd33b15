import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PrettyDestination, SECRET_FIELDS, createLogger, formatPretty, loadConfig, redactLine, resolveLogFormat } from '@agentry/runtime';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-logger-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A terminal stand-in: what was written, and whether it claims to be a TTY (colours). */
function sink(isTTY = false) {
  const out: string[] = [];
  return { out, write: (t: string) => void out.push(t), isTTY };
}

describe('log lines for a person (logging.format)', () => {
  it('auto is pretty on a terminal and JSON otherwise; json and pretty are forced', () => {
    expect(resolveLogFormat('auto', true)).toBe('pretty');
    expect(resolveLogFormat('auto', false)).toBe('json');
    expect(resolveLogFormat('json', true)).toBe('json');
    expect(resolveLogFormat('pretty', false)).toBe('pretty');
  });

  it('AGENTRY_LOG_FORMAT overrides the file, and a wrong value is refused with the choices', () => {
    expect(loadConfig({ argv: [], env: {}, cwd: dir }).config.logging.format).toBe('auto');
    expect(loadConfig({ argv: [], env: { AGENTRY_LOG_FORMAT: 'json' }, cwd: dir }).config.logging.format).toBe('json');
    expect(() => loadConfig({ argv: [], env: { AGENTRY_LOG_FORMAT: 'yaml' }, cwd: dir })).toThrow('AGENTRY_LOG_FORMAT: "yaml" is not one of auto, json, pretty');
  });

  it('turns a JSON line into time, level, message and the fields, without the noise; secrets stay redacted', () => {
    const s = sink();
    const logger = createLogger({ service: 'gateway', level: 'info', destination: new PrettyDestination(s) });
    logger.info({ port: 9527, url: 'http://localhost:9527', note: 'two words', password: 'hunter2' }, 'gateway listening');
    logger.flush();
    expect(s.out).toHaveLength(1);
    expect(s.out[0]).toMatch(/^\d\d:\d\d:\d\d INFO  gateway listening port=9527 url=http:\/\/localhost:9527 note="two words" password=\[redacted\]\n$/);
    expect(s.out[0]).not.toMatch(/hostname|pid|service|hunter2/);
  });

  it("says an error's message after the text and its stack for errors only; colours only on a TTY", () => {
    const entry = { level: 50, time: Date.now(), msg: 'request failed', err: { message: 'boom', stack: 'Error: boom\n    at here (a.ts:1:1)' } };
    const plain = formatPretty(entry, false);
    expect(plain).toMatch(/ERROR request failed: boom\n {4}at here \(a\.ts:1:1\)$/);
    expect(formatPretty({ ...entry, level: 40 }, false)).not.toContain('at here');
    expect(plain).not.toContain('\u001b[');
    expect(formatPretty(entry, true)).toContain('\u001b[31m');
  });

  it('quiet() lets only warnings and errors through; print() writes text as it is; a line that is no JSON passes', () => {
    const s = sink();
    const dest = new PrettyDestination(s);
    const logger = createLogger({ service: 'standalone', level: 'info', destination: dest });
    logger.info('before');
    dest.print('Agentry is ready');
    dest.quiet();
    logger.info('after, hidden');
    logger.warn('after, shown');
    dest.write('not json\n');
    logger.flush();
    expect(s.out.join('')).toMatch(/INFO  before\nAgentry is ready\n\d\d:\d\d:\d\d WARN  after, shown\nnot json\n$/);
  });
});

describe('secrets never reach a log line', () => {
  // A parsed line, read field by field: its shape is what the test asserts.
  type Entry = { [key: string]: any }; // eslint-disable-line @typescript-eslint/no-explicit-any
  /** JSON lines as the logger writes them. */
  function capture() {
    const lines: string[] = [];
    const logger = createLogger({ service: 'gateway', level: 'info', destination: { write: (l: string) => void lines.push(l) } });
    return { lines, logger };
  }

  it('blanks every field named like a secret at any depth, whatever its type, and keeps the rest', () => {
    const { lines, logger } = capture();
    logger.info(
      {
        password: 'hunter2',
        req: { method: 'POST', headers: { authorization: 'Bearer sk-live-1', cookie: 's=sk-live-2', 'x-api-key': 'sk-live-3', host: 'h' } },
        account: { api_key: 'sk-live-4', nested: { deeper: { token: { value: 'sk-live-5', list: ['sk-live-6', { a: '}' }] } } } },
        list: [{ secret: 42 }, { appSecret: null }, { jwtSecret: true }],
        note: 'a "token": "not a key" in a value stays',
        after: 'kept',
      },
      'hello',
    );
    const line = lines.join('');
    expect(line).not.toMatch(/hunter2|sk-live/);
    const entry = JSON.parse(line) as Entry;
    expect(entry.password).toBe('[redacted]');
    expect(entry.req.headers).toEqual({ authorization: '[redacted]', cookie: '[redacted]', 'x-api-key': '[redacted]', host: 'h' });
    expect(entry.account).toEqual({ api_key: '[redacted]', nested: { deeper: { token: '[redacted]' } } });
    expect(entry.list).toEqual([{ secret: '[redacted]' }, { appSecret: '[redacted]' }, { jwtSecret: '[redacted]' }]);
    expect(entry.note).toBe('a "token": "not a key" in a value stays');
    expect(entry.after).toBe('kept');
    expect(entry.msg).toBe('hello');
  });

  it("covers a child logger's bindings and an error's own fields", () => {
    const { lines, logger } = capture();
    const err = Object.assign(new Error('boom'), { token: 'sk-live-7', response: { headers: { authorization: 'Bearer sk-live-8' } } });
    logger.child({ reqId: 'r1', newPassword: 'sk-live-9' }).error({ err }, 'failed');
    const entry = JSON.parse(lines.join('')) as Entry;
    expect(lines.join('')).not.toContain('sk-live');
    expect(entry.newPassword).toBe('[redacted]');
    expect(entry.reqId).toBe('r1');
    expect(entry.err.token).toBe('[redacted]');
    expect(entry.err.response.headers.authorization).toBe('[redacted]');
    expect(entry.err.message).toBe('boom');
  });

  it('leaves a line without secrets as it is, and every name of SECRET_FIELDS is blanked', () => {
    const plain = '{"level":30,"msg":"password and token in a message","n":1}\n';
    expect(redactLine(plain)).toBe(plain);
    for (const name of SECRET_FIELDS) {
      const line = `${JSON.stringify({ a: 1, [name]: 'sk-x', b: { [name]: [1, { c: 'sk-y' }] }, z: 2 })}\n`;
      expect(JSON.parse(redactLine(line))).toEqual({ a: 1, [name]: '[redacted]', b: { [name]: '[redacted]' }, z: 2 });
    }
  });

  it('a value it cannot find the end of is blanked to the end of the line', () => {
    expect(redactLine('{"token":"sk-unterminated\n')).toBe('{"token":"[redacted]"\n');
  });
});
