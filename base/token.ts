// The one rule for a name that stands as a single subject token (a job, a node): letters,
// digits, '_' and '-'. NATS wildcards and separators ('*', '>', '.') and white space are out.

export const TOKEN_RE = /^[A-Za-z0-9_-]+$/;

/** What a token may hold, for error messages. */
export const TOKEN_CHARS = '[A-Za-z0-9_-]+';

export function isToken(x: unknown): x is string {
  return typeof x === 'string' && TOKEN_RE.test(x);
}
