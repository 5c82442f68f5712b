// Small checks of a peer's plain data (a config, a report body, a reply), shared by the
// modules that check one: each says what a value must be, or null when it is.

/** What a value must be, or null when it is. */
export type Check = (v: unknown) => string | null;

export const finite: Check = (v) => (typeof v === 'number' && Number.isFinite(v) ? null : 'a finite number');

/** A map as a decoder makes one: not a list, a typed array or a Map. */
export function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !ArrayBuffer.isView(v) && !(v instanceof Map);
}

/** A list of `each`, `what` naming its items for the message. */
export const listOf =
  (each: Check, what: string): Check =>
  (v) =>
    Array.isArray(v) && v.every((x) => each(x) === null) ? null : `a list of ${what}`;
