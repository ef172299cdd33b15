/** One readable line for any thrown value (pg's refused connections are AggregateErrors with no message). */
export function describeError(err: unknown): string {
  if (err instanceof AggregateError && !err.message && err.errors.length > 0) {
    return describeError(err.errors[0]);
  }
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    if (err.message) return err.message;
    return typeof code === 'string' ? code : err.name;
  }
  return String(err);
}
