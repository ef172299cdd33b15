import { describe, expect, it } from 'vitest';
import { AppError, Errors, hasCode, isAppError } from '@agentry/errors';

describe('error registry', () => {
  it('gives every entry a unique code and an HTTP status', () => {
    const codes = Object.values(Errors).map((e) => e.code);
    expect(new Set(codes).size).toBe(codes.length);
    for (const [key, cls] of Object.entries(Errors)) {
      expect(cls.code).toBe(key);
      expect(cls.status).toBeGreaterThanOrEqual(400);
      expect(cls.status).toBeLessThan(600);
    }
  });

  it('builds messages from the fixed prefix and the detail', () => {
    const err = new Errors.NOT_FOUND('agent "x"');
    expect(err).toBeInstanceOf(AppError);
    expect(err.message).toBe('Not found: agent "x"');
    expect(err.status).toBe(404);
    expect(new Errors.NOT_FOUND().message).toBe('Not found');
  });

  it('recognises codes', () => {
    const err = new Errors.CONFLICT('id a');
    expect(isAppError(err)).toBe(true);
    expect(hasCode(err, Errors.CONFLICT)).toBe(true);
    expect(hasCode(err, Errors.NOT_FOUND)).toBe(false);
    expect(isAppError(new Error('x'))).toBe(false);
  });

  it('keeps the cause', () => {
    const cause = new Error('low level');
    expect(new Errors.UPSTREAM('provider', { cause }).cause).toBe(cause);
  });
});
