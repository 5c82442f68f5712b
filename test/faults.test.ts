import { strict as assert } from 'assert';
import { LocalBus } from '../transport/local-bus';
import { FaultBus } from '../transport/fault-bus';
import { FaultSpecError, parseFaultSpec } from '../transport/fault-spec';
import { RealClock } from '../base/clock';
import { batonInProcess } from './helpers-cli';
import { natsServerForSuite } from './nats-server-fixture';

const json = (out: string) => JSON.parse(out) as Record<string, unknown>;

/** Publish `n` numbered messages on one subject through a fault bus; what arrived, in order. */
async function through(spec: string, n: number): Promise<{ got: number[]; bus: FaultBus }> {
  const inner = new LocalBus();
  const got: number[] = [];
  inner.subscribe('s.x', (_s, d) => got.push(d[0] + 256 * d[1]));
  const bus = new FaultBus(inner, parseFaultSpec(spec, 1)!, new RealClock());
  for (let i = 0; i < n; i++) bus.publish('s.x', new Uint8Array([i % 256, i >> 8]));
  await new Promise((r) => setTimeout(r, 40));
  return { got, bus };
}

describe('injected faults and lost-message recovery', function () {
  this.timeout(120_000);

  it('parses --inject-faults, and refuses what is not a probability or a known name (exit 2)', async () => {
    assert.equal(parseFaultSpec('none', 3), null);
    assert.deepEqual(parseFaultSpec('drop=0.01,dup=0.02', 3), {
      drop: 0.01,
      dup: 0.02,
      delay: 0,
      delayMs: 20,
      reorder: 0,
      seed: 3,
    });
    for (const bad of ['drop=2', 'lose=0.1', 'drop=x', 'delay-ms=-1', 'drop'])
      assert.throws(() => parseFaultSpec(bad, 0), FaultSpecError, bad);
    const r = await batonInProcess('sim', '--inject-faults', 'drop=1.5');
    assert.equal(r.code, 2);
    assert.match(r.err, /--inject-faults: drop: a probability from 0 to 1/);
  });

  it('drops, duplicates, delays and reorders as seeded: the same seed, the same faults', async () => {
    const a = await through('drop=0.1,dup=0.1,delay=0.1,delay-ms=5,reorder=0.1,seed=9', 2000);
    const b = await through('drop=0.1,dup=0.1,delay=0.1,delay-ms=5,reorder=0.1,seed=9', 2000);
    // What arrives is the same; the order of delayed ones is the real clock's timers'.
    const sorted = (xs: number[]) => [...xs].sort((x, y) => x - y);
    assert.deepEqual(sorted(a.got), sorted(b.got));
    assert.deepEqual(a.bus.counts, b.bus.counts);
    const c = a.bus.counts;
    for (const k of ['dropped', 'duplicated', 'delayed', 'reordered'] as const)
      assert.ok(c[k] > 120 && c[k] < 300, `${k}: ${c[k]} of 2000`);
    // A drop is a message missing; a duplicate one twice; a delay or a hold one out of order.
    assert.equal(new Set(a.got).size, 2000 - c.dropped);
    assert.equal(a.got.length, 2000 - c.dropped + c.duplicated);
    assert.notDeepEqual(a.got, sorted(a.got));
    const swapped = await through('reorder=1', 2);
    assert.deepEqual(swapped.got, [1, 0]);
  });

  it('sim: every dropped activation and gradient is resent on request and the run completes as without faults', async () => {
    const args = ['sim', '--stages', '4', '--microbatches', '8', '--iterations', '3', '--json'];
    const clean = json((await batonInProcess(...args)).out);
    const r = await batonInProcess(...args, '--inject-faults', 'drop=0.1,dup=0.1,delay=0.1,reorder=0.1');
    assert.equal(r.code, 0, r.err);
    const faulty = json(r.out);
    assert.ok((faulty.resent as number) > 0, r.out);
    assert.equal(faulty.tasks, clean.tasks);
    assert.equal(faulty.messages, clean.messages);
    assert.equal(clean.resent, undefined);
    assert.equal(faulty.rejected, 0);
  });

  it('refuses injected drops where nothing resends (asynchronous mode)', async () => {
    const r = await batonInProcess('sim', '--mode', 'async', '--inject-faults', 'drop=0.01');
    assert.equal(r.code, 2);
    assert.match(r.err, /injected drops are recovered by resending/);
  });

  it('every message lost for good in one process (drop=1): the stall watchdog ends the job after --stall-timeout', async () => {
    const t0 = Date.now();
    const r = await batonInProcess(
      ...['train', '--stages', '2', '--layers', '2', '--width', '16', '--seq', '8', '--microbatch-size', '2'],
      ...['--microbatches', '2', '--iterations', '3', '--val-batches', '1', '--job', 'faults-local-all'],
      ...['--inject-faults', 'drop=1', '--stall-timeout', '3000', '--quiet'],
    );
    const took = Date.now() - t0;
    assert.equal(r.code, 1, r.err);
    assert.match(r.err, /DeadlockError: deadlock at t=[\d.]+ ms: 2 stage\(s\) idle with work left/);
    assert.match(r.err, /stage 1, iteration 0: idle .* waiting for F0 \(input\)/);
    assert.ok(took < 20_000, `ended after ${took} ms`);
  });

  describe('over a real nats-server, one process per stage', () => {
    const server = natsServerForSuite();
    const trainArgs = () => [
      'train',
      '--model',
      'gpt',
      '--stages',
      '4',
      '--microbatches',
      '4',
      '--iterations',
      '3',
      '--layers',
      '4',
      '--width',
      '16',
      '--seq',
      '8',
      '--microbatch-size',
      '2',
      '--transport',
      'nats',
      '--nats',
      server().url,
      '--json',
      '--quiet',
    ];

    it('train (GPT, P = 4) with 1% drop and 1% duplicate injection ends with the fault-free param_checksum', async () => {
      const clean = await batonInProcess(...trainArgs(), '--job', 'faults-clean');
      assert.equal(clean.code, 0, clean.err);
      const hit = await batonInProcess(
        ...trainArgs(),
        '--job',
        'faults-hit',
        '--inject-faults',
        'drop=0.01,dup=0.01,seed=1',
      );
      assert.equal(hit.code, 0, hit.err);
      const [c, h] = [json(clean.out), json(hit.out)];
      console.log(
        `      (resent: fault-free ${c.resent ?? 0}, injected ${h.resent ?? 0}; wall ${c.wall_ms} / ${h.wall_ms} ms)`,
      );
      assert.equal(h.param_checksum, c.param_checksum);
      assert.ok((h.resent as number) >= 1, hit.out);
    });

    it('every message lost for good (drop=1): the stall watchdog ends the job after --stall-timeout, though the stages keep asking for resends', async () => {
      const t0 = Date.now();
      const r = await batonInProcess(
        ...trainArgs(),
        '--job',
        'faults-all',
        '--inject-faults',
        'drop=1',
        '--stall-timeout',
        '3000',
        '--max-restarts',
        '0',
      );
      const took = Date.now() - t0;
      console.log(`      (ended after ${took} ms)`);
      assert.equal(r.code, 1, r.err);
      // The watchdog asks every stage its status: each is idle, waiting for what never came.
      assert.match(r.err, /DeadlockError: deadlock at t=[\d.]+ ms: 4 stage\(s\) idle with work left/);
      assert.match(r.err, /stage 1, iteration 0: idle .* waiting for F0 \(input\)/);
      // 3 s without progress, up to 5 s for the stages' statuses, and the processes' start and stop.
      assert.ok(took < 30_000, `ended after ${took} ms`);
    });
  });
});
