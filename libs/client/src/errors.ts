/** The server answered with a status >= 400; `message` is its `{error}` text. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly status: number,
    message: string,
    /** The parsed body (usually `{error}`), or the text when it was not JSON. */
    readonly body?: unknown,
    /** The server's `x-request-id`, for finding the request in its logs. */
    readonly requestId?: string,
  ) {
    super(message);
  }
}

/** The server could not be reached (refused, DNS, TLS, reset before an answer). */
export class ConnectionError extends Error {
  override readonly name = 'ConnectionError';
  constructor(
    readonly url: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * A chat stream failed after it started: an `{error}` event from the server, a broken
 * connection, or an end without `data: [DONE]`.
 */
export class StreamError extends Error {
  override readonly name = 'StreamError';
  constructor(
    message: string,
    /** The status the server gave the failure, when it gave one. */
    readonly status?: number,
  ) {
    super(message);
  }
}
