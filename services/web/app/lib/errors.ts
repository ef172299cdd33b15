import { humanError as sentenceOf } from '@agentry/client';

/**
 * Errors as people read them: a sentence saying what went wrong in their terms, and the text the
 * gateway sent (which names chains, nodes and error classes) kept as the technical detail that
 * the UI puts behind a disclosure. Pure: unit-tested under Node.
 */

export interface HumanError {
  /** What to show first. */
  summary: string;
  /** The text as received, when the summary is not it. */
  detail: string | null;
}

/** A sentence for a status when the text itself says nothing more useful. */
function byStatus(status: number | undefined): string | null {
  if (status === 401) return 'Your login has expired or was not accepted; please log in again.';
  if (status === 403) return 'You are not allowed to do this.';
  if (status === 429) return 'Too many requests right now; wait a moment and try again.';
  if (status === 503) return 'The service is not ready (its database or queue is away); try again shortly.';
  return null;
}

function capitalize(text: string): string {
  return text ? text[0]!.toUpperCase() + text.slice(1) : text;
}

/** The human sentence for an error text (and its HTTP status when known). */
export function humanError(text: string, status?: number): HumanError {
  const raw = text.trim();
  if (/^(?:Failed to fetch|NetworkError|Load failed)/i.test(raw)) {
    return { summary: 'The gateway could not be reached. Check that it is running and try again.', detail: raw };
  }
  // The wording of a run's error is the client library's, shared with the CLI.
  const cause = sentenceOf(raw).message;
  let summary: string;
  if (cause.startsWith('the model provider ')) summary = capitalize(cause);
  else if (/^the agent failed unexpectedly/i.test(cause)) summary = 'The agent failed unexpectedly. The server log has the details.';
  else if (/^stopped before the answer was complete/.test(cause)) summary = 'Stopped before the answer was complete.';
  else summary = cause || byStatus(status) || raw || 'Something went wrong.';
  return { summary, detail: summary === raw ? null : raw };
}
