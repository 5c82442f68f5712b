// The comm lanes of Baton's Chrome trace: each message from its send to its receive on
// the sender's lanes, with a flow arrow to an arrival marker on the receiver's comm track.

import { BatonEvent, ReceiveEvent, SendEvent } from '../../stage/events';
import { ChromeEvent, TraceClock, commTid, stagePid, TID } from './chrome-format';

/** Key under which a send and its receive meet: the message's identity and route. */
function messageKey(iteration: number, kind: string, mb: number, chunk: number, src: number, dst: number): string {
  return `${iteration}|${kind}|${mb}|${chunk}|${src}>${dst}`;
}

/** Each message paired with its send, on the sender's comm lanes, with a flow arrow to an
 * arrival marker on the receiver's comm track; and how many lanes each sender needed. */
export function messageEvents(
  events: readonly BatonEvent[],
  { ns, rel, span }: TraceClock,
): { messages: ChromeEvent[]; lanes: Map<number, number> } {
  const sends = new Map<string, SendEvent[]>();
  for (const e of events) {
    if (e.type !== 'send') continue;
    const key = messageKey(e.iteration, e.kind, e.mb, e.chunk, e.stage, e.dst);
    const q = sends.get(key);
    if (q) q.push(e);
    else sends.set(key, [e]);
  }
  const messages: { s: SendEvent; r: ReceiveEvent; lane: number }[] = [];
  for (const r of events) {
    if (r.type !== 'receive') continue;
    // Inputs from outside the pipeline (src < 0, the data feed) have no send to pair with.
    const s = sends.get(messageKey(r.iteration, r.kind, r.mb, r.chunk, r.src, r.stage))?.shift();
    if (s) messages.push({ s, r, lane: 0 });
  }
  // Each message takes the first lane of its sender that is free when it is sent (a
  // message ending as another starts leaves the lane free, as Perfetto reads it).
  const laneEnds = new Map<number, number[]>();
  messages.sort((a, b) => a.s.t - b.s.t);
  for (const m of messages) {
    const ends = laneEnds.get(m.s.stage) ?? [];
    laneEnds.set(m.s.stage, ends);
    const start = ns(m.s.t);
    const lane = ends.findIndex((end) => end <= start);
    m.lane = lane < 0 ? ends.length : lane;
    ends[m.lane] = Math.max(start, ns(m.r.t));
  }
  const out: ChromeEvent[] = [];
  let flowId = 0;
  for (const { s, r, lane } of messages) {
    const id = ++flowId;
    const name = `${r.kind} mb${r.mb}${r.chunk === 0 ? '' : `@${r.chunk}`} ${s.stage}→${r.stage}`;
    const args = {
      iteration: r.iteration,
      microbatch: r.mb,
      chunk: r.chunk,
      src: s.stage,
      dst: r.stage,
      seq: s.seq,
      bytes: s.bytes,
      latency_ms: r.latency,
    };
    const tid = commTid(lane);
    const arrival = rel(Math.max(r.t, s.t));
    out.push({ name, cat: r.kind, ph: 'X', ...span(s.t, r.t), pid: stagePid(s.stage), tid, args });
    out.push({ name, cat: r.kind, ph: 's', id, ts: rel(s.t), pid: stagePid(s.stage), tid });
    // The arrival marker gives the flow's end a slice to bind to on the receiver's track.
    const receiver = { pid: stagePid(r.stage), tid: TID.comm };
    out.push({ name: `arrive ${name}`, cat: r.kind, ph: 'i', s: 't', ts: arrival, ...receiver, args });
    out.push({ name, cat: r.kind, ph: 'f', bp: 'e', id, ts: arrival, ...receiver });
  }
  return { messages: out, lanes: new Map([...laneEnds].map(([stage, ends]) => [stage, ends.length])) };
}
