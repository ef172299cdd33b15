/**
 * A run's error as a person reads it. The API's `{error}` of a failed run names where it
 * happened (`chain "support", node "agent" (ai/agent): Upstream failure: provider "fake" (model
 * m): HTTP 500: exploded (3 attempts)`), which an operator needs and a chat user does not. This
 * is the one place that turns that message into a sentence; clients (the CLI, the web UI) show
 * `message` and keep `detail` (the API's message as it came) for whoever asks for it.
 */
export interface HumanError {
  /** The sentence to show. */
  message: string;
  /** The API's message when it differs from `message`, else undefined. */
  detail?: string;
}

/** `chain "x", node "y" (type): `, as the chain runner prefixes a node's failure (sub-chains nest). */
const WHERE = /^chain "[^"]*", node "[^"]*" \([^)]*\): /;
const UPSTREAM = 'Upstream failure: ';
/**
 * Class words of the error registry (`@agentry/errors`) that come before the cause and mean
 * nothing to a reader; "Not found: ..." and "Not allowed: ..." stay, they are the sentence.
 */
const CLASS_WORDS = /^(?:Internal server error|Invalid input): /;
/** One provider's failure, as the model layer words it: `provider "p" (model m): what`. */
const PROVIDER = /^provider "([^"]+)" \(model [^)]*\): ([\s\S]*)$/;

function providerSentence(part: string): string {
  const m = PROVIDER.exec(part);
  if (!m) return part;
  const what = m[2]!.replace(/^HTTP (\d{3}): /, 'HTTP $1 ');
  return `the model provider '${m[1]}' failed: ${what}`;
}

export function humanError(apiMessage: string): HumanError {
  let rest = apiMessage;
  while (WHERE.test(rest)) rest = rest.replace(WHERE, '');
  if (rest.startsWith(UPSTREAM)) {
    // Failover joins every provider tried with "; " (a provider's own text has no quote-led "provider").
    rest = rest
      .slice(UPSTREAM.length)
      .split(/; (?=provider ")/)
      .map(providerSentence)
      .join('; then ');
  }
  rest = rest.replace(CLASS_WORDS, '');
  return rest === apiMessage ? { message: rest } : { message: rest, detail: apiMessage };
}
