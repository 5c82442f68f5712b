// Fuzzing the actors that take messages from the network, while they work: a job whose
// stages, receivers and coordinator hear malformed variants of the job's own messages
// in the middle of its iterations, and a node agent (and the launcher that drives it)
// hearing malformed requests, replies, announcements, claims and trace batches. The
// properties: nothing is thrown out of a bus handler, no actor fails, every malformed
// message is counted as rejected, and the job still completes and validates.

import { strict as assert } from 'assert';
import { JobConfig, resolveConfig } from '../job/config';
import { runJob } from '../job/run-local';
import { runDistributed } from '../job/run-distributed';
import { ANNOUNCE_SUBJECT, NODES_PREFIX, nodeSubject } from '../actors/node-agent';
import { claimSubject } from '../job/job-claim';
import { isReplyPrefix } from '../actors/node-protocol';
import { Bus, BusHandler } from '../transport/bus';
import { decodeEnvelope, decodeValue, encodeValue } from '../transport/codec';
import { Envelope } from '../transport/envelope';
import { LocalBus } from '../transport/local-bus';
import { parseSubject } from '../transport/subjects';
import { FUZZ_SEED, Rng, cases, malformed } from './fuzz-gen';
import { newNodeAgent } from '../job/node-host';

/** The in-process bus under another kind's name: a job on it draws a launch id and checks it, as over NATS. */
class LaunchCheckedBus implements Bus {
  readonly kind = 'nats-like';
  constructor(readonly inner: LocalBus) {}
  get maxMessageBytes() {
    return this.inner.maxMessageBytes;
  }
  publish(s: string, d: Uint8Array) {
    this.inner.publish(s, d);
  }
  subscribe(s: string, h: BusHandler) {
    return this.inner.subscribe(s, h);
  }
  flush() {
    return this.inner.flush();
  }
  written() {
    return this.inner.written();
  }
  close() {
    return this.inner.close();
  }
}

/**
 * Whether a stage or the coordinator is bound to refuse `e` whatever its state: another
 * job, stage or launch, an unknown kind or verb, a microbatch or chunk outside the shape,
 * an iteration far from any the job runs. (A mutation that is still a valid message of
 * the job, a forgery, is not sent: it would be taken, as a peer's genuine message is.)
 */
function surelyRefused(e: Envelope, subj: string, cfg: JobConfig, launch: string | undefined): boolean {
  const stage = Number(parseSubject(subj)?.stage ?? -1);
  if (e.job !== cfg.job || e.launch !== launch) return true;
  if (parseSubject(subj)?.kind === 'report') return e.kind !== 'report' || e.src >= cfg.stages || e.iteration > 1e6;
  if (e.dst !== stage && e.kind !== 'control') return true;
  if (e.kind === 'control') return e.body?.verb !== 'start' || e.iteration > 1e6;
  if (!['data', 'activation', 'gradient'].includes(e.kind)) return true;
  return e.mb >= cfg.microbatches || e.chunk >= cfg.chunks || e.mb < 0 || e.chunk < 0 || e.iteration > 1e6;
}

describe('fuzz: a job hearing malformed messages mid-run', () => {
  const configs: Partial<JobConfig>[] = [
    { stages: 3, microbatches: 4, iterations: 3, policy: 'bf' },
    { stages: 2, microbatches: 4, chunks: 2, iterations: 2, policy: 'interleaved-1f1b' },
    { stages: 3, microbatches: 3, iterations: 2, policy: 'zb-h1' },
    {
      stages: 2,
      microbatches: 6,
      iterations: 1,
      mode: 'async',
      async: { ...resolveConfig({}).async, consistency: 'fresco' },
    },
  ];
  for (const [ci, partial] of configs.entries()) {
    it(`counts every one as rejected and completes (${partial.policy ?? partial.mode}, P=${partial.stages}, V=${partial.chunks ?? 1})`, async () => {
      const rng = new Rng(FUZZ_SEED + ci);
      const runs = cases(2);
      for (let run = 0; run < runs; run++) {
        const cfg = resolveConfig({ job: 'fz', jitter: 'none', seed: run, ...partial });
        const local = new LocalBus();
        const bus = new LaunchCheckedBus(local);
        const seen: { subject: string; data: Uint8Array }[] = [];
        let launch: string | undefined;
        local.subscribe('baton.fz.>', (subject, data) => {
          if (seen.length < 200) seen.push({ subject, data: Uint8Array.from(data) });
          if (launch === undefined) launch = (decodeEnvelope(data) as Envelope).launch;
        });
        let injected = 0;
        let injecting = false;
        const lastIteration = cfg.iterations - 1;
        const inject = (iteration: number) => {
          if (injecting || seen.length === 0 || (iteration >= lastIteration && cfg.iterations > 1) || !rng.bool(0.3))
            return;
          injecting = true;
          try {
            for (let k = 0; k < 1 + rng.int(3); k++) {
              const orig = rng.pick(seen);
              const bytes = rng.bool(0.1) ? orig.data : malformed(orig.data, rng);
              let e: Envelope | null = null;
              try {
                e = decodeEnvelope(bytes);
              } catch {
                /* refused by the codec */
              }
              // An exact replay is refused as a duplicate or as late; a forgery is not sent.
              if (e && bytes !== orig.data && !surelyRefused(e, orig.subject, cfg, launch)) continue;
              if (cfg.mode === 'async' && bytes === orig.data) continue; // one continuous iteration: a replay may come first
              injected++;
              local.publish(orig.subject, bytes);
            }
          } finally {
            injecting = false;
          }
        };
        const errorsBefore = local.errors;
        const r = await runJob(cfg, { clock: 'virtual', bus, sinks: [(e) => inject(e.iteration)] });
        assert.equal(local.errors, errorsBefore, 'a bus handler threw');
        assert.equal(r.records.length, cfg.iterations);
        assert.equal(
          r.totals.rejected,
          injected,
          `run ${run}: ${injected} malformed messages sent, ${r.totals.rejected} rejected: ${r.rejects.slice(0, 5).join('\n')}`,
        );
        await local.close();
      }
    });
  }
});

const REPLY = `${NODES_PREFIX}.reply.fuzz`;

/** Valid requests of every verb but exit, as a launcher sends them. */
function validRequests(): Uint8Array[] {
  const config = resolveConfig({ job: 'fzn', stages: 2, microbatches: 2 });
  return [
    { verb: 'host', reply: REPLY, config, stages: [0, 1], leaseMs: 60000, launch: 'l1' },
    { verb: 'renew', reply: REPLY, job: 'fzn', launch: 'l1' },
    { verb: 'status', reply: REPLY, job: 'fzn', launch: 'l1' },
    { verb: 'finish', reply: REPLY, job: 'fzn', launch: 'l1' },
    { verb: 'abort', reply: REPLY, job: 'fzn', launch: 'l1' },
    { verb: 'ping' },
  ].map((r) => encodeValue(r));
}

describe('fuzz: a node agent hearing malformed requests', () => {
  it('answers or counts every one, throws nothing out of its handler, and keeps serving', async () => {
    const bus = new LocalBus();
    const replies: Record<string, unknown>[] = [];
    let hellos = 0;
    bus.subscribe(REPLY, (_s, d) => replies.push(decodeValue(d) as Record<string, unknown>));
    bus.subscribe(ANNOUNCE_SUBJECT, () => hellos++);
    const agent = newNodeAgent({ name: 'n1', bus, log: () => {} });
    agent.start();
    const rng = new Rng(FUZZ_SEED ^ 0x5eed);
    const valid = validRequests();
    const n = cases(800);
    let sent = 0;
    for (let i = 0; i < n; i++) {
      const bytes = malformed(rng.pick(valid), rng);
      let v: unknown;
      try {
        v = decodeValue(bytes);
      } catch {
        /* malformed CBOR: counted */
      }
      // exit stops the agent, as it should: not sent.
      if (v && typeof v === 'object' && (v as { verb?: unknown }).verb === 'exit') continue;
      const before = { rejected: agent.rejected, replies: replies.length, hellos };
      bus.publish(nodeSubject('n1'), bytes);
      sent++;
      // Requests are handled asynchronously (a host may await its backend): let them settle.
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
      const heard = agent.rejected > before.rejected || replies.length > before.replies || hellos > before.hellos;
      // A request the agent takes but that names no reply subject it may answer on leaves no trace.
      const unanswerable = v !== null && typeof v === 'object' && (v as { reply?: unknown }).reply !== REPLY;
      assert.ok(
        heard || unanswerable,
        `request ${i} (${Buffer.from(bytes.subarray(0, 48)).toString('hex')}) was neither answered nor counted`,
      );
    }
    assert.equal(bus.errors, 0, 'a handler threw');
    agent.leave('test over');
    assert.equal(agent.rejected > 0, true);
    // Still serving: a ping is answered, a job is hosted and finished.
    const h = hellos;
    bus.publish(nodeSubject('n1'), encodeValue({ verb: 'ping' }));
    assert.equal(hellos, h + 1);
    assert.ok(sent > n / 2);
    await bus.close();
  });
});

/** The verb of a message that decodes to an object (as String makes of it), or undefined for one that does not. */
function decodedVerb(bytes: Uint8Array): string | undefined {
  let v: unknown;
  try {
    v = decodeValue(bytes);
  } catch {
    return undefined;
  }
  return v && typeof v === 'object' ? String((v as { verb?: unknown }).verb) : undefined;
}

describe('fuzz: a launcher and its agent hearing malformed messages on every subject', () => {
  it('completes the job, counting what it refuses', async () => {
    const rng = new Rng(FUZZ_SEED ^ 0xd15);
    for (let run = 0; run < cases(1); run++) {
      const bus = new LocalBus();
      const seen: { subject: string; data: Uint8Array }[] = [];
      const tapped = bus.subscribe('baton.>', (subject, data) => {
        if (seen.length < 300) seen.push({ subject, data: Uint8Array.from(data) });
      });
      newNodeAgent({ name: 'n1', bus, log: () => {} }).start();
      const cfg = resolveConfig({ job: `fzd${run}`, stages: 2, microbatches: 3, iterations: 2 });
      let injected = 0;
      const timer = setInterval(() => {
        for (let k = 0; k < 20 && seen.length > 0; k++) {
          const orig = rng.pick(seen);
          const kind = parseSubject(orig.subject);
          // Only malformed bytes on the job's own subjects (a well-formed message there with the
          // launch id is the job's own); anything on the nodes' and claims' subjects.
          const bytes = malformed(orig.data, rng);
          const onJob = kind?.job === cfg.job;
          if (orig.subject === nodeSubject('n1')) {
            // Requests to the agent are the launcher's business; a malformed one that still
            // names the job could abort or finish it, as a launcher may.
            // One that does not decode goes through: the agent counts it.
            const verb = decodedVerb(bytes);
            if (verb !== undefined && ['exit', 'abort', 'finish', 'host'].includes(verb)) continue;
          } else if (
            isReplyPrefix(orig.subject) ||
            orig.subject === ANNOUNCE_SUBJECT ||
            orig.subject.startsWith(claimSubject(cfg.job))
          ) {
            // Replies: a well-formed one of another verb may be a forgery (failure, leaving); send the malformed ones.
            // One that does not decode goes through: it is malformed.
            const verb = decodedVerb(bytes);
            if (verb !== undefined && ['failure', 'leaving', 'error'].includes(verb)) continue;
          } else if (onJob) {
            let ok = true;
            try {
              if (kind?.kind === 'trace') decodeValue(bytes);
              else decodeEnvelope(bytes);
            } catch {
              ok = false;
            }
            if (ok) continue;
          }
          injected++;
          bus.publish(orig.subject, bytes);
        }
      }, 2);
      try {
        const r = await runDistributed(cfg, { bus, nodes: ['n1'], settleMs: 0, nodeTimeoutMs: 5000 });
        assert.equal(r.records.length, 2);
      } finally {
        clearInterval(timer);
        tapped.unsubscribe();
        await bus.close();
      }
      assert.equal(bus.errors, 0, 'a handler threw');
      assert.ok(injected > 0);
    }
  });
});
