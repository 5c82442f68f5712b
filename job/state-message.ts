// The head of a message on baton.<job>.state.<stage>: a synchronous stage's flush state
// (job/state-keeper.ts) or an asynchronous stage's snapshot (job/snapshot-keeper.ts).
// Decoded, a state message of this job and of the launch followed, from the stage its
// subject names; what the body holds is each keeper's to check.

import { decodeValue } from '../transport/codec';
import { subject } from '../transport/subjects';
import { quoteValue } from '../base/quote';

export interface StateHead {
  readonly v: Record<string, unknown>;
  readonly stage: number;
}

/** The message and its stage, or why it is refused. `noLaunch` names the launch when none is followed. */
export function stateMessageHead(
  subj: string,
  data: Uint8Array,
  o: { job: string; launch: string | undefined; stages: number; noLaunch: string },
): StateHead | string {
  let v: Record<string, unknown>;
  try {
    v = decodeValue(data) as Record<string, unknown>;
  } catch (err) {
    return (err as Error).message;
  }
  if (typeof v !== 'object' || v === null || v.verb !== 'state' || v.job !== o.job)
    return 'not a state message of this job';
  if (o.launch === undefined || v.launch !== o.launch)
    return `of launch ${quoteValue(v.launch, 40)}, not ${o.launch ?? o.noLaunch}`;
  const stage = v.stage;
  if (
    typeof stage !== 'number' ||
    !Number.isInteger(stage) ||
    stage < 0 ||
    stage >= o.stages ||
    subj !== subject(o.job, 'state', stage)
  )
    return `stage ${quoteValue(stage, 20)} on ${quoteValue(subj, 200)}`;
  return { v, stage };
}
