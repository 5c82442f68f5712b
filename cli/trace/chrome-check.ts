// Checking a trace file against the Chrome Trace Event Format (JSON object or array
// form) for `baton trace check`, and Baton's own metadata (the stage count and the
// embedded events) that `baton trace gantt|summary` read back. It checks each event's
// fields and that flow starts and finishes pair up; it does not check that complete
// events on a thread nest (Perfetto drops those that do not), nor B/E balance.

import { BatonEvent, eventProblem } from '../../stage/events';
import { SHAPE_LIMITS } from '../../policies/task';

// Phases of the Trace Event Format: duration, complete, instant, counter, async
// (nestable and legacy), flow, sample, object, metadata, memory dump, mark, context.
const KNOWN_PH = new Set([
  'B',
  'E',
  'X',
  'i',
  'I',
  'C',
  'b',
  'n',
  'e',
  'S',
  'T',
  'p',
  'F',
  's',
  't',
  'f',
  'P',
  'N',
  'O',
  'D',
  'M',
  'V',
  'v',
  'R',
  'c',
  '(',
  ')',
]);
const FLOW_PH = new Set(['s', 't', 'f']);
const ASYNC_PH = new Set(['b', 'n', 'e', 'S', 'T', 'p', 'F']);
const METADATA_ARG: Record<string, [string, 'string' | 'number']> = {
  process_name: ['name', 'string'],
  thread_name: ['name', 'string'],
  process_labels: ['labels', 'string'],
  process_sort_index: ['sort_index', 'number'],
  thread_sort_index: ['sort_index', 'number'],
};

const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const quote = (v: unknown) => (v === undefined ? 'nothing' : JSON.stringify(v));

/** Baton's own metadata (the embedded events and the stage count), read back by summary and gantt. */
function batonMetadataProblems(meta: Record<string, unknown>): string[] {
  const problems: string[] = [];
  if (
    meta.stages !== undefined &&
    !(
      Number.isSafeInteger(meta.stages) &&
      (meta.stages as number) >= 1 &&
      (meta.stages as number) <= SHAPE_LIMITS.stages
    )
  )
    problems.push(`metadata.stages must be an integer from 1 to ${SHAPE_LIMITS.stages}, got ${quote(meta.stages)}`);
  for (const key of ['title', 'job'])
    if (meta[key] !== undefined && typeof meta[key] !== 'string')
      problems.push(`metadata.${key} must be a string, got ${quote(meta[key])}`);
  if (meta.config !== undefined && !isObj(meta.config))
    problems.push(`metadata.config must be an object, got ${quote(meta.config)}`);
  const events = meta.baton_events;
  if (events === undefined) return problems;
  if (!Array.isArray(events)) return [...problems, `metadata.baton_events must be an array, got ${quote(events)}`];
  events.forEach((e, i) => {
    const p = eventProblem(e);
    if (p) problems.push(`metadata.baton_events[${i}]: ${p}`);
    else if ((e as BatonEvent).stage >= SHAPE_LIMITS.stages)
      problems.push(`metadata.baton_events[${i}]: stage ${(e as BatonEvent).stage} is over ${SHAPE_LIMITS.stages - 1}`);
  });
  return problems;
}

/** Schema problems of a Trace Event Format document (JSON object or array form); empty when valid. */
export function checkChromeTrace(json: unknown): string[] {
  const problems: string[] = [];
  let events: unknown[];
  if (Array.isArray(json)) events = json;
  else if (isObj(json)) {
    if (!Array.isArray(json.traceEvents))
      return [`top level: traceEvents must be an array, got ${quote(json.traceEvents)}`];
    events = json.traceEvents;
    if (json.displayTimeUnit !== undefined && json.displayTimeUnit !== 'ms' && json.displayTimeUnit !== 'ns')
      problems.push(`top level: displayTimeUnit must be "ms" or "ns", got ${quote(json.displayTimeUnit)}`);
    if (json.metadata !== undefined && !isObj(json.metadata))
      problems.push(`top level: metadata must be an object, got ${quote(json.metadata)}`);
    else if (isObj(json.metadata)) problems.push(...batonMetadataProblems(json.metadata));
  } else return [`top level: expected an object with traceEvents or an array of events, got ${quote(json)}`];

  const flows: Flows = new Map();
  events.forEach((raw, i) => problems.push(...eventProblems(raw, i, flows)));
  return [...problems, ...flowProblems(flows)];
}

/** Flow events seen so far, by category and id: the times of the start and the finish. */
type Flows = Map<string, { start?: number; finish?: number; at: number }>;

/** The problems of traceEvents[i]; a flow event is also noted in `flows`. */
function eventProblems(raw: unknown, i: number, flows: Flows): string[] {
  const problems: string[] = [];
  if (!isObj(raw)) return [`traceEvents[${i}]: an event must be an object, got ${quote(raw)}`];
  const ph = raw.ph;
  const where = `traceEvents[${i}] (ph ${quote(ph)}, name ${quote(raw.name)})`;
  const bad = (what: string, v: unknown) => problems.push(`${where}: ${what}, got ${quote(v)}`);
  if (typeof ph !== 'string' || !KNOWN_PH.has(ph)) {
    bad(`ph must be one of ${[...KNOWN_PH].join(' ')}`, ph);
    return problems;
  }
  if (ph !== 'E' && typeof raw.name !== 'string') bad('name must be a string', raw.name);
  if (ph !== 'M' || raw.ts !== undefined) if (!isNum(raw.ts)) bad('ts must be a finite number (microseconds)', raw.ts);
  if (!isNum(raw.pid)) bad('pid must be a number', raw.pid);
  if (ph !== 'C' || raw.tid !== undefined) if (!isNum(raw.tid)) bad('tid must be a number', raw.tid);
  if (raw.cat !== undefined && typeof raw.cat !== 'string') bad('cat must be a string', raw.cat);
  if (raw.args !== undefined && !isObj(raw.args)) bad('args must be an object', raw.args);
  if (ph === 'X' && !(isNum(raw.dur) && raw.dur >= 0)) bad('a complete event needs dur >= 0', raw.dur);
  if ((ph === 'i' || ph === 'I') && raw.s !== undefined && !['g', 'p', 't'].includes(raw.s as string))
    bad('instant scope s must be g, p or t', raw.s);
  if (ph === 'C') {
    if (!isObj(raw.args) || Object.keys(raw.args).length === 0)
      bad('a counter needs args with at least one series', raw.args);
    else
      for (const [k, v] of Object.entries(raw.args))
        if (!isNum(v)) bad(`counter series ${JSON.stringify(k)} must be a number`, v);
  }
  if (ASYNC_PH.has(ph) && (raw.id === undefined || raw.id === null) && raw.id2 === undefined)
    bad('an async event needs an id', raw.id);
  if (FLOW_PH.has(ph)) {
    if (typeof raw.id !== 'number' && typeof raw.id !== 'string') {
      bad('a flow event needs an id (number or string)', raw.id);
      return problems;
    }
    if (ph === 'f' && raw.bp !== undefined && raw.bp !== 'e') bad('flow end binding point bp must be "e"', raw.bp);
    const key = `${raw.cat ?? ''}|${raw.id}`;
    const f = flows.get(key) ?? { at: i };
    if (ph === 's') {
      if (f.start !== undefined) bad(`flow id ${raw.id} starts twice (first at traceEvents[${f.at}])`, raw.id);
      f.start = raw.ts as number;
    } else if (ph === 'f') {
      if (f.finish !== undefined) bad(`flow id ${raw.id} finishes twice`, raw.id);
      f.finish = raw.ts as number;
    }
    flows.set(key, f);
  }
  if (ph === 'M') {
    const spec = Object.prototype.hasOwnProperty.call(METADATA_ARG, raw.name as string)
      ? METADATA_ARG[raw.name as string]
      : undefined;
    if (spec) {
      const v = isObj(raw.args) ? raw.args[spec[0]] : undefined;
      if (typeof v !== spec[1]) bad(`metadata ${raw.name} needs args.${spec[0]} as a ${spec[1]}`, v);
    }
  }
  return problems;
}

/** Flows that start without finishing, finish without starting, or finish before they start. */
function flowProblems(flows: Flows): string[] {
  const problems: string[] = [];
  for (const [key, f] of flows) {
    const id = key.slice(key.indexOf('|') + 1);
    if (f.start === undefined)
      problems.push(`flow id ${id} (cat ${JSON.stringify(key.split('|')[0])}): finish or step without a start`);
    else if (f.finish === undefined)
      problems.push(`flow id ${id} (cat ${JSON.stringify(key.split('|')[0])}): start without a finish`);
    else if (f.finish < f.start)
      problems.push(`flow id ${id}: finishes at ${f.finish} us before it starts at ${f.start} us`);
  }
  return problems;
}
