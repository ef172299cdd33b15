import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * Whether a secret or signature given by a caller equals the expected one. Both are hashed first,
 * so the time taken reveals neither where they differ nor the expected value's length.
 */
export function constantTimeEqual(given: string | Buffer, expected: string | Buffer): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}
