import { strict as assert } from 'assert';
import { Clock } from '../base/clock';
import { StageCompute } from '../stage/compute';
import { resolveConfig } from '../job/config';
import { runJob } from '../job/run-local';
import { checkReceived } from '../compute/training-boundary';
import { ArrivalRefusedError } from '../stage/compute';
import { Task } from '../policies/task';
import { encodeEnvelope } from '../transport/codec';
import { ENVELOPE_VERSION, TensorPayload } from '../transport/envelope';
import { LocalBus } from '../transport/local-bus';

const f32 = (n: number): TensorPayload => ({ dtype: 'float32', shape: [n], data: new Float32Array(n).fill(n) });

/**
 * Compute that sends one float32 tensor of 4 values downstream and, on stage 1, takes only
 * that (checkArrival) and records what each forward got.
 */
class TensorCompute implements StageCompute {
  readonly kind = 'tensor-test';
  readonly got = new Map<number, readonly TensorPayload[]>();
  private readonly received = new Map<number, readonly TensorPayload[]>();
  constructor(
    private readonly stage: number,
    private readonly clock: Clock,
  ) {}

  checkArrival(kind: 'input' | 'grad', mb: number, chunk: number, tensors: readonly TensorPayload[]): void {
    checkReceived(this.stage, kind, mb, chunk, tensors, [4]);
  }

  accept(_it: number, kind: 'input' | 'grad', mb: number, _chunk: number, tensors: readonly TensorPayload[]): void {
    if (kind === 'input') this.received.set(mb, tensors);
  }

  run(_it: number, t: Task, done: (out?: readonly TensorPayload[]) => void): void {
    if (t.kind === 'F' && this.stage === 1) this.got.set(t.mb, this.received.get(t.mb) ?? []);
    this.clock.setTimer(1, () =>
      done(t.kind === 'F' && this.stage === 0 ? [f32(4)] : t.kind === 'B' && this.stage === 1 ? [f32(4)] : []),
    );
  }
}

describe('a stage checks what an arrival carries before it counts', () => {
  it('rejects forged activations that came first, and runs each forward on the real one', async () => {
    const bus = new LocalBus();
    const cfg = resolveConfig({ job: 'forged', stages: 2, microbatches: 3, policy: 'bf', profile: 'uniform' });
    const forgeries: TensorPayload[][] = [
      [f32(4), f32(4)],
      [f32(3)],
      [{ dtype: 'int32', shape: [4], data: new Int32Array(4) }],
    ];
    // As stage 1 learns that its iteration started, a peer sends it a bad activation for every microbatch.
    bus.subscribe('baton.forged.control.1', () => {
      forgeries.forEach((tensors, mb) =>
        bus.publish(
          'baton.forged.activation.1',
          encodeEnvelope({
            v: ENVELOPE_VERSION,
            job: 'forged',
            kind: 'activation',
            iteration: 0,
            mb,
            chunk: 0,
            dir: 'forward',
            src: 0,
            dst: 1,
            seq: 1000 + mb,
            sentAt: 0,
            bytes: 16,
            tensors,
          }),
        ),
      );
    });
    const computes: TensorCompute[] = [];
    const r = await runJob(cfg, {
      clock: 'virtual',
      bus,
      computeFor: (s, clock) => (computes[s] = new TensorCompute(s, clock)),
    });
    assert.equal(r.totals.tasks, 2 * 3 * 2);
    assert.equal(r.totals.rejected, 3);
    for (const mb of [0, 1, 2]) {
      const got = computes[1].got.get(mb)!;
      assert.equal(got.length, 1, `F${mb} ran on one tensor`);
      assert.deepEqual([...(got[0].data as Float32Array)], [4, 4, 4, 4]);
    }
    assert.ok(
      r.rejects.some((d) => /stage 1: activation for microbatch 0 carries 2 tensors, expected 1/.test(d)),
      r.rejects.join('\n'),
    );
    assert.ok(
      r.rejects.some((d) => /shape \[3\], expected \[4\]/.test(d)),
      r.rejects.join('\n'),
    );
    assert.ok(
      r.rejects.some((d) => /dtype int32, expected float32/.test(d)),
      r.rejects.join('\n'),
    );
  });

  it("expects no tensor with stage 0's data signal, and exactly the hidden shape elsewhere", () => {
    assert.doesNotThrow(() => checkReceived(0, 'input', 0, 0, [], [2, 3]));
    assert.throws(
      () => checkReceived(0, 'input', 0, 0, [f32(6)], [2, 3]),
      (e: Error) => e instanceof ArrivalRefusedError && /data signal/.test(e.message),
    );
    assert.throws(() => checkReceived(0, 'input', 0, 1, [], [2, 3]), /carries 0 tensors/);
    assert.throws(
      () => checkReceived(1, 'grad', 5, 0, [{ dtype: 'float32', shape: [3, 2], data: new Float32Array(6) }], [2, 3]),
      /gradient for microbatch 5 has shape \[3,2\], expected \[2,3\]/,
    );
    assert.doesNotThrow(() =>
      checkReceived(1, 'grad', 5, 0, [{ dtype: 'float32', shape: [2, 3], data: new Float32Array(6) }], [2, 3]),
    );
  });
});
