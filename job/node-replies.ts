// The check of the node replies whose fields a launcher reads without further checks (the
// counts and lists of `finished`, the stage statuses of `status`, the subject of `denied`).

import { quoteValue } from '../base/quote';
import { Reply } from './reply-box';

const isCount = (x: unknown): boolean => Number.isSafeInteger(x) && (x as number) >= 0;
const isCountOrNull = (x: unknown): boolean => x === null || Number.isSafeInteger(x);
const isTexts = (x: unknown): boolean => Array.isArray(x) && x.every((t) => typeof t === 'string');
const STATUS_FIELDS: readonly (readonly [string, (x: unknown) => boolean])[] = [
  ['stage', isCount],
  ['iteration', isCountOrNull],
  ['running', (x) => x === null || typeof x === 'string'],
  ['remaining', isCount],
  ['inflight', isCount],
  ['forwardReady', isTexts],
  ['backwardReady', isTexts],
  ['weightReady', isTexts],
  ['waitingFor', isTexts],
  ['idleSince', (x) => x === null || (typeof x === 'number' && Number.isFinite(x))],
  // Absent from the statuses of earlier agents.
  ['held', (x) => x === undefined || isCount(x)],
  ['heldIteration', (x) => x === undefined || isCountOrNull(x)],
];

/**
 * What is wrong with the fields of a node's reply that the launcher reads (the counts and
 * lists of `finished`, the stage statuses of `status`), or null. The launcher reads them
 * without further checks, so a malformed one is refused, and a well-formed one can still come.
 */
export function replyProblem(r: Reply): string | null {
  if (r.verb === 'finished') {
    const events = r.events;
    if (events === null || typeof events !== 'object' || Array.isArray(events) || ArrayBuffer.isView(events))
      return `its events must be a map of stage to count, got ${quoteValue(events)}`;
    for (const [s, n] of Object.entries(events))
      if (!/^(0|[1-9][0-9]*)$/.test(s) || !isCount(n))
        return `its events must be a map of stage to count, got ${quoteValue(events)}`;
    for (const k of ['failures', 'lostTrace'])
      if (r[k] !== undefined && !isTexts(r[k])) return `its ${k} must be a list of strings, got ${quoteValue(r[k])}`;
  } else if (r.verb === 'denied') {
    if (typeof r.subject !== 'string') return `its subject must be a string, got ${quoteValue(r.subject)}`;
    if (r.operation !== 'publish' && r.operation !== 'subscription')
      return `its operation must be publish or subscription, got ${quoteValue(r.operation)}`;
    if (r.stages !== undefined && !(Array.isArray(r.stages) && r.stages.every(isCount)))
      return `its stages must be a list of stage numbers, got ${quoteValue(r.stages)}`;
  } else if (r.verb === 'status') {
    if (!Array.isArray(r.statuses)) return `its statuses must be a list, got ${quoteValue(r.statuses)}`;
    for (const st of r.statuses) {
      if (st === null || typeof st !== 'object' || Array.isArray(st))
        return `a stage status must be a map, got ${quoteValue(st)}`;
      const bad = STATUS_FIELDS.find(([k, ok]) => !ok((st as Record<string, unknown>)[k]));
      if (bad) return `a stage status's ${bad[0]} is ${quoteValue((st as Record<string, unknown>)[bad[0]])}`;
    }
  }
  return null;
}
