import { smallMlpJob } from './helpers-train';
import { strict as assert } from 'assert';
import { existsSync, mkdtempSync, writeFileSync } from 'fs';
import * as os from 'os';
import * as path from 'path';
import { resolveConfig } from '../job/config';
import { summarize } from '../job/run-local';
import { runOnce } from '../cli/run';
import { train } from '../cli/train';
import { readCheckpointMeta } from '../job/checkpoint';
import { NatsBus } from '../transport/nats-bus';
import { encodeValue, decodeValue } from '../transport/codec';
import { natsServerForSuite } from './nats-server-fixture';
import { Attack, attack } from './attacker';

const ALL: readonly Attack[] = ['activations', 'reports', 'control', 'stranger-module', 'trace'];

/** The stranger's module: it leaves a file behind if anyone ever loads it. */
function strangerModule(): { module: string; ran: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-stranger-'));
  const ran = path.join(dir, 'ran');
  const module = path.join(dir, 'evil.js');
  writeFileSync(
    module,
    `require('fs').writeFileSync(${JSON.stringify(ran)}, 'stranger code ran');\nmodule.exports = {};\n`,
  );
  return { module, ran };
}

const unauthenticated = (rejects: readonly string[]) => rejects.filter((r) => /\(unauthenticated\)/.test(r)).length;

describe('a stranger on the NATS server, without the job key', function () {
  this.timeout(240_000);
  const server = natsServerForSuite();

  it('changes nothing in a run: forged activations, reports, trace batches, abort, exit, finish and a host of its module are refused and counted', async () => {
    const cfg = (job: string) =>
      resolveConfig({ job, stages: 3, microbatches: 8, iterations: 3, policy: 'bf', profile: 'uniform' });
    const { module, ran } = strangerModule();
    const stranger = await attack(server().url, 'hit', ALL, module);
    try {
      const o = await runOnce(cfg('hit'), { transport: 'nats', processes: 'per-stage', natsUrl: server().url });
      const s = summarize(o.result);
      assert.equal(s.tasks, 3 * 3 * 8 * 2, 'every measured task ran once');
      for (const a of ALL) assert.ok(stranger.sent[a] > 0, `${a}: sent ${stranger.sent[a]}`);
      const forged = Object.values(stranger.sent).reduce((a, b) => a + b, 0);
      assert.ok(s.rejected >= forged - 8, `rejected ${s.rejected} of ${forged} forged`);
      assert.ok(unauthenticated(o.result.rejects) > 0, o.result.rejects.join('\n'));
      assert.equal(existsSync(ran), false, "the stranger's module never ran");
    } finally {
      await stranger.stop();
    }
  });

  it('changes nothing in a training job: same param_checksum, final loss and checkpoint as a clean run', async () => {
    const cfg = (job: string, dir: string) => smallMlpJob(job, dir, 1);
    const setup = { transport: 'nats' as const, processes: 'per-stage' as const, natsUrl: server().url };
    const [cleanDir, hitDir] = ['clean', 'hit'].map((n) => mkdtempSync(path.join(os.tmpdir(), `baton-ck-${n}-`)));
    const clean = await train(cfg('tclean', cleanDir), setup);
    const { module, ran } = strangerModule();
    const stranger = await attack(server().url, 'thit', ALL, module);
    try {
      const hit = await train(cfg('thit', hitDir), setup);
      assert.equal(hit.param_checksum, clean.param_checksum);
      assert.equal(hit.final_loss, clean.final_loss);
      assert.deepEqual(readCheckpointMeta(hitDir).files, readCheckpointMeta(cleanDir).files);
      for (const a of ['activations', 'reports', 'control'] as const)
        assert.ok(stranger.sent[a] > 0, `${a}: sent ${stranger.sent[a]}`);
      assert.ok(hit.summary.rejected > 0, `rejected ${hit.summary.rejected}`);
      assert.equal(existsSync(ran), false, "the stranger's module never ran");
    } finally {
      await stranger.stop();
    }
  });

  it('squatting on the job name stops a launch on a shared server, with an error that names the squatting', async () => {
    const squatter = await NatsBus.connect(server().url);
    squatter.subscribe('baton.squat.claim', (_s, d) => {
      const q = decodeValue(d) as { reply: string };
      squatter.publish(q.reply, encodeValue({ token: 'feed', pid: 1, host: 'nowhere' }));
    });
    await squatter.flush();
    try {
      await assert.rejects(
        runOnce(resolveConfig({ job: 'squat', stages: 2, microbatches: 2, policy: 'bf', profile: 'uniform' }), {
          transport: 'nats',
          processes: 'per-stage',
          natsUrl: server().url,
        }),
        (e: Error) => e.name === 'JobNameTakenError' && /a peer squatting on the name/.test(e.message),
      );
    } finally {
      await squatter.close();
    }
  });
});
