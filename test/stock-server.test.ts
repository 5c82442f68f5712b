import { strict as assert } from 'assert';
import { resolveConfig } from '../job/config';
import { train } from '../cli/train';
import { runOnce } from '../cli/run-once';
import { TRAIN_DEFAULTS, JOB_DEFAULTS } from '../job/defaults';
import { NatsServerHandle, startNatsServer } from '../transport/nats-server';
import { NatsBus } from '../transport/nats-bus';
import { TrainConfig } from '../models/train-config';

// A nats-server with its stock config (max_payload 1 MB) carries jobs whose reports and
// tensors are bigger than that: over the limit, messages go in chunks.
describe('jobs on a nats-server with its default config (max_payload 1 MB)', function () {
  this.timeout(300_000);
  let server: NatsServerHandle;
  // tfjs's kernels: with the native ones, a stage process and the launcher's process do not
  // round alike for the default model today (a matter of the kernels, not of the transport).
  const kernelsBefore = process.env['BATON_KERNELS'];
  before(async () => {
    process.env['BATON_KERNELS'] = 'tfjs';
    server = await startNatsServer({ stock: true });
    const probe = await NatsBus.connect(server.url);
    assert.equal(probe.maxPayload, 1024 * 1024, 'the stock max_payload');
    await probe.close();
  });
  after(async () => {
    if (kernelsBefore === undefined) delete process.env['BATON_KERNELS'];
    else process.env['BATON_KERNELS'] = kernelsBefore;
    await server?.stop();
  });

  const trainJob = (job: string, t: Partial<TrainConfig>) =>
    resolveConfig({
      job,
      stages: JOB_DEFAULTS.stages,
      profile: 'train',
      iterations: 1,
      train: { ...TRAIN_DEFAULTS, totalIterations: 1, valBatches: 2, ...t },
    });

  it('trains the default model (its reports about 1.3 MB) to the local bus checksum, one process per stage', async () => {
    const local = await train(trainJob('stockl', {}), { transport: 'local', processes: 'single', threads: 1 });
    const r = await train(trainJob('stockd', {}), {
      transport: 'nats',
      processes: 'per-stage',
      natsUrl: server.url,
      threads: 1,
    });
    assert.equal(r.summary.processes, JOB_DEFAULTS.stages);
    assert.equal(r.param_checksum, local.param_checksum);
  });

  it('trains a wider model whose reports are several MiB each', async () => {
    const t = { width: 256, heads: 4, layers: 4, seq: 16, microbatchSize: 4 };
    const r = await train(trainJob('stockw', t), {
      transport: 'nats',
      processes: 'per-stage',
      natsUrl: server.url,
      threads: 1,
    });
    const local = await train(trainJob('stockwl', t), { transport: 'local', processes: 'single', threads: 1 });
    assert.equal(r.param_checksum, local.param_checksum);
  });

  it('runs the default emulated job, one process per stage', async () => {
    const cfg = resolveConfig({ job: 'stockrun', iterations: 2, warmupIterations: 1 });
    const out = await runOnce(cfg, { transport: 'nats', processes: 'per-stage', natsUrl: server.url });
    assert.equal(out.processes, cfg.stages);
    assert.equal(out.result.iterations.length, 2);
  });
});
