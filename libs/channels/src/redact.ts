/** `text` with every occurrence of each secret replaced by `mask` (empty secrets are skipped). */
export function maskSecrets(text: string, secrets: readonly string[], mask: string): string {
  let out = text;
  for (const secret of secrets) if (secret) out = out.split(secret).join(mask);
  return out;
}

/**
 * A platform's own error text made fit for a log: platforms should never echo a secret, but error
 * messages end up in logs. Values shorter than 6 characters are left alone, since masking them
 * would garble ordinary words; the result is cut to 300 characters.
 */
export function redact(text: string, secrets: readonly string[]): string {
  const out = maskSecrets(text, secrets.filter((s) => s.length >= 6), '<redacted>');
  return out.length > 300 ? `${out.slice(0, 300)}…` : out;
}
