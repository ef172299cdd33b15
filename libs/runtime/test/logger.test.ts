import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PrettyDestination, createLogger, formatPretty, loadConfig, resolveLogFormat } from '@agentry/runtime';

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
