// The messages of a job's policy control, on baton.<job>.policy.<verb>: plain CBOR maps.
//   set   {verb, policy, what?, by, replyTo, atIteration?}   a swap request (baton policy set)
//   get   {verb, replyTo}                               the policies in force (baton policy get)
//   ack   {verb, launch?, stage, swap, iteration, tasks}  a stage adopted a swap
// Answers go to `replyTo`, which must be one of this job's reply subjects
// (baton.<job>.policy.reply.<token>), so a request cannot make the job publish elsewhere.
// Over NATS every message is sealed under the job key (transport/auth-bus.ts refuses what is
// not before it gets here). Every message then passes `checkControl`, the one place for
// checks of where it came from, and then its parser; what fails either is a counted
// rejection, never a change of policy.

import { quoteValue } from '../base/quote';
import { TOKEN_RE } from '../base/token';
import { decodeValue } from '../transport/codec';
import { subject } from '../transport/subjects';

export type PolicyVerb = 'set' | 'get' | 'ack';

export interface SetRequest {
  readonly verb: 'set';
  /** The new arbitration policy, or with `what: 'consistency'` the new consistency policy. */
  readonly policy: string;
  readonly what?: 'arbitration' | 'consistency';
  readonly by: string;
  readonly replyTo?: string;
  readonly atIteration?: number;
}
export interface GetRequest {
  readonly verb: 'get';
  readonly replyTo: string;
}
export interface SwapAck {
  readonly verb: 'ack';
  readonly launch?: string;
  readonly stage: number;
  readonly swap: number;
  readonly iteration: number;
  readonly tasks: number;
}
export type PolicyMessage = SetRequest | GetRequest | SwapAck;

const MAX_TEXT = 300;

export function policySubject(job: string, verb: PolicyVerb | 'reply', token?: string): string {
  return token === undefined ? subject(job, 'policy', verb) : `${subject(job, 'policy', verb)}.${token}`;
}

/** Whether `replyTo` is one of `job`'s reply subjects. */
export function isReplySubject(job: string, replyTo: unknown): replyTo is string {
  if (typeof replyTo !== 'string') return false;
  const prefix = `${policySubject(job, 'reply')}.`;
  return replyTo.startsWith(prefix) && TOKEN_RE.test(replyTo.slice(prefix.length)) && replyTo.length <= 200;
}

/** Who sealed a control message: `required` on a sealed bus, `sender` the seal's label (absent: none opened). */
export interface ControlSeal {
  readonly required: boolean;
  readonly sender?: string;
}

/** The seal label of a tool that talks to a job (baton policy): it may ask, never ack for a stage. */
export const TOOL_LABEL_PREFIX = 'tool:';

/**
 * The one check every control message passes before it is parsed: it came on this job's
 * policy subject as a map, sealed under the job key when the job's bus seals, and an ack
 * (a stage's adoption) was sealed by a process that hosts stages, not by a tool.
 */
export function checkControl(job: string, subj: string, v: unknown, seal?: ControlSeal): string | null {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return 'a policy message must be a map';
  if (!subj.startsWith(`${subject(job, 'policy')}.`)) return `not on this job's policy subjects`;
  if (seal?.required && seal.sender === undefined) return 'not sealed under the job key';
  if (subj === subject(job, 'policy', 'ack') && seal?.sender?.startsWith(TOOL_LABEL_PREFIX))
    return `an ack is a stage's, but ${quoteValue(seal.sender)} sealed it`;
  return null;
}

const text = (v: unknown) => typeof v === 'string' && v.length > 0 && v.length <= MAX_TEXT;
const count = (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 0;

/** The message `data` on `subj` carries, or a problem saying why it is refused. */
export function parsePolicyMessage(
  job: string,
  subj: string,
  data: Uint8Array,
  seal?: ControlSeal,
): PolicyMessage | string {
  let v: unknown;
  try {
    v = decodeValue(data, { maxBytes: 64 * 1024 });
  } catch (err) {
    return (err as Error).message;
  }
  const problem = checkControl(job, subj, v, seal);
  if (problem) return problem;
  const m = v as Record<string, unknown>;
  const verb = subj.slice(subject(job, 'policy').length + 1);
  if (m.verb !== verb) return `verb ${quoteValue(m.verb)} on the ${quoteValue(verb)} subject`;
  if (verb === 'set') {
    if (!text(m.policy)) return `set: policy must be a name or module path of 1 to ${MAX_TEXT} characters`;
    if (m.replyTo !== undefined && !isReplySubject(job, m.replyTo))
      return `set: replyTo must be a subject ${policySubject(job, 'reply')}.<token>`;
    if (m.atIteration !== undefined && !count(m.atIteration)) return 'set: atIteration must be an integer >= 0';
    if (m.what !== undefined && m.what !== 'arbitration' && m.what !== 'consistency')
      return `set: what must be arbitration or consistency, got ${quoteValue(m.what)}`;
    const by = typeof m.by === 'string' ? m.by.slice(0, 100) : 'unknown';
    return {
      verb,
      policy: m.policy as string,
      what: m.what as SetRequest['what'],
      by,
      replyTo: m.replyTo as string | undefined,
      atIteration: m.atIteration as number | undefined,
    };
  }
  if (verb === 'get') {
    if (!isReplySubject(job, m.replyTo)) return `get: replyTo must be a subject ${policySubject(job, 'reply')}.<token>`;
    return { verb, replyTo: m.replyTo };
  }
  if (verb === 'ack') {
    if (!count(m.stage) || !count(m.swap) || !count(m.tasks) || !Number.isSafeInteger(m.iteration))
      return 'ack: stage, swap, tasks and iteration must be integers';
    return {
      verb,
      launch: typeof m.launch === 'string' ? m.launch : undefined,
      stage: m.stage as number,
      swap: m.swap as number,
      iteration: m.iteration as number,
      tasks: m.tasks as number,
    };
  }
  return `unknown policy verb ${quoteValue(verb)}`;
}
