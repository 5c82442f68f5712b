import { strict as assert } from 'assert';
import { runJob } from '../job/run-local';
import { nodeUser, ownServerUsers, sharedServerUsers } from '../job/nats-users';
import { jobNodeSubjects } from '../actors/node-agent';
import { subject } from '../transport/subjects';
import { stageRoutes } from '../policies/task';
import { BatonEvent } from '../stage/events';
import { bfUniform } from './helpers-job';

// The stage users' publish permissions against the runtime's own traffic: every activation
// and gradient a simulated job of P stages × V chunks sends is on a subject its sender's
// user may publish to, and every activation or gradient subject a user may publish to is
// one the runtime uses (no wider than the pipeline).

/** Whether NATS subject `s` matches the pattern `p` (`*` one token, `>` one or more at the end). */
function natsMatch(p: string, s: string): boolean {
  const pt = p.split('.');
  const st = s.split('.');
  for (let i = 0; i < pt.length; i++) {
    if (pt[i] === '>') return st.length > i;
    if (i >= st.length || (pt[i] !== '*' && pt[i] !== st[i])) return false;
  }
  return pt.length === st.length;
}

const allows = (patterns: readonly string[] | undefined, s: string) => (patterns ?? []).some((p) => natsMatch(p, s));

/** The (sender, subject) of every stage-to-stage message of a simulated job. */
async function sentSubjects(job: string, stages: number, chunks: number): Promise<Set<string>> {
  const events: BatonEvent[] = [];
  const cfg = bfUniform(job, stages, 2 * stages, { chunks, iterations: 1 });
  await runJob(cfg, { clock: 'virtual', sinks: [(e) => events.push(e)] });
  const sent = new Set<string>();
  for (const e of events)
    if (e.type === 'send' && (e.kind === 'activation' || e.kind === 'gradient'))
      sent.add(`${e.stage} ${subject(job, e.kind, e.dst)}`);
  return sent;
}

describe('stage users derived from the runtime routing (job/nats-users.ts)', function () {
  this.timeout(60_000);

  it('stageRoutes: a straight pipeline sends to its neighbours; an interleaved one also wraps from the last stage to stage 0', () => {
    assert.deepEqual(stageRoutes(0, { stages: 3, chunks: 1 }), { activation: [1], gradient: [] });
    assert.deepEqual(stageRoutes(2, { stages: 3, chunks: 1 }), { activation: [], gradient: [1] });
    assert.deepEqual(stageRoutes(2, { stages: 3, chunks: 2 }), { activation: [0], gradient: [1] });
    assert.deepEqual(stageRoutes(0, { stages: 3, chunks: 2 }), { activation: [1], gradient: [2] });
    assert.deepEqual(stageRoutes(0, { stages: 1, chunks: 4 }), { activation: [], gradient: [] });
  });

  for (const [stages, chunks] of [
    [2, 1],
    [2, 2],
    [3, 2],
    [4, 3],
  ] as const)
    it(`P=${stages}, V=${chunks}: every activation and gradient the runtime sends is allowed, and nothing else of those kinds`, async () => {
      const job = `route${stages}x${chunks}`;
      const sent = await sentSubjects(job, stages, chunks);
      const names = Array.from({ length: stages }, (_, s) => `n${s}`);
      const { stages: users } = ownServerUsers({ job, stages, chunks, tp: 1, dp: 1 }, names);
      for (const line of sent) {
        const [s, subj] = line.split(' ');
        assert.ok(
          allows(users[Number(s)].publish, subj),
          `stage ${s} sends on ${subj}, which its user may not publish`,
        );
      }
      for (let s = 0; s < stages; s++)
        for (const p of users[s].publish ?? [])
          if (/\.(activation|gradient)\.\d+$/.test(p))
            assert.ok(sent.has(`${s} ${p}`), `stage ${s}'s user may publish ${p}, which the runtime never sends on`);
    });

  it('a shared server’s agent users follow the chunks too: with V=2 the last stage may feed stage 0, with V=1 not', () => {
    const chunked = sharedServerUsers('sj', ['a', 'b'], { stages: 2, chunks: 2 });
    const straight = sharedServerUsers('sj', ['a', 'b'], { stages: 2, chunks: 1 });
    assert.ok(allows(chunked.nodes[1].publish, 'baton.sj.activation.0'));
    assert.ok(allows(chunked.nodes[0].publish, 'baton.sj.gradient.1'));
    assert.ok(!allows(straight.nodes[1].publish, 'baton.sj.activation.0'));
    assert.ok(!allows(straight.nodes[0].publish, 'baton.sj.gradient.1'));
    // One agent hosting both stages may send either way.
    const one = nodeUser(
      { job: 'sj', name: 'x', stages: [0, 1], shape: { stages: 2, chunks: 2 }, at: jobNodeSubjects('sj') },
      'u',
      'p',
    );
    assert.ok(allows(one.publish, 'baton.sj.activation.0.r0d1'));
  });
});
