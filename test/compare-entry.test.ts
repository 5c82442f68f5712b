import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { main } from '../cli/main';
import { comparedConfig, entryLabel } from '../cli/compare-entry';
import { DEFAULTS } from '../job/config';

async function baton(...argv: string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const code = await main(argv, (s) => (out += `${s}\n`));
  return { code, out };
}

const DEMO_SHAPE = '--stages 4 --microbatches 16 --profile multimodal --jitter paper --seed 1'.split(' ');

describe('honest comparisons', function () {
  this.timeout(120000);

  it('reads a buffer limit after @ in a --compare entry, and only there', () => {
    assert.equal(comparedConfig(DEFAULTS, 'bf@depth').bufferLimit, 'depth');
    assert.equal(comparedConfig(DEFAULTS, 'bf@8').bufferLimit, 8);
    assert.equal(comparedConfig(DEFAULTS, 'bf@8').policy, 'bf');
    assert.equal(comparedConfig(DEFAULTS, 'hint:1f1b').policy, 'hint:1f1b');
    assert.equal(comparedConfig(DEFAULTS, './x@y.js').policy, './x@y.js');
    assert.equal(entryLabel('bf@depth'), 'bf @depth');
    assert.throws(() => comparedConfig(DEFAULTS, 'bf@0'), /--compare bf@0: --buffer-limit must be a positive integer/);
  });

  it("shows bf at the default limit and at 1F1B's memory beside binding 1f1b, with peak in-flight by the speedup", async () => {
    const r = await baton('sim', ...DEMO_SHAPE, '--compare', '1f1b,bf,bf@depth');
    assert.equal(r.code, 0);
    const lines = r.out.split('\n');
    assert.match(
      lines[1],
      /^policy +buffer limit +makespan ms +speedup vs 1f1b +peak in-flight +cap +efficiency +bubble$/,
    );
    assert.match(lines[3], /^1f1b +schedule .* 4,3,2,1 +4,3,2,1 /);
    assert.match(lines[4], /^bf +32 .* 16,16,16,16 /);
    assert.match(lines[5], /^bf +depth .* 4,3,2,1 +4,3,2,1 /);
    assert.match(r.out, /efficiency = lower bound \/ makespan/);
    assert.match(r.out, /bubble = share of stage time idle/);
    assert.match(r.out, /peak in-flight = most forwards/);
    const json = JSON.parse((await baton('sim', ...DEMO_SHAPE, '--compare', '1f1b,bf,bf@depth', '--json')).out) as {
      buffer_limit: unknown;
      peak_inflight: number[];
    }[];
    assert.deepEqual(
      json.map((x) => x.buffer_limit),
      [32, 32, 'depth'],
    );
    assert.ok(Math.max(...json[1].peak_inflight) > Math.max(...json[2].peak_inflight));
  });

  it("runs the demo (scripts/demo.sh) with 1f1b, bf and bf at 1F1B's memory", () => {
    const demo = fs.readFileSync(path.join(__dirname, '..', '..', 'scripts', 'demo.sh'), 'utf8');
    assert.match(demo, /--compare 1f1b,bf,bf@depth /);
    for (const flag of DEMO_SHAPE.filter((x) => x.startsWith('--'))) assert.ok(demo.includes(flag), flag);
  });

  it('lets sim leave warm-up iterations out as run does, so the same flags measure the same iterations', async () => {
    const flags = ['--stages', '2', '--microbatches', '4', '--jitter', 'paper', '--iterations', '2'];
    const sim = JSON.parse((await baton('sim', ...flags, '--warmup-iterations', '1', '--json')).out) as {
      warmup_iterations: number;
      iterations: { iteration: number }[];
    };
    assert.equal(sim.warmup_iterations, 1);
    assert.deepEqual(
      sim.iterations.map((i) => i.iteration),
      [1, 2],
    );
    const plain = JSON.parse((await baton('sim', ...flags, '--json')).out) as { warmup_iterations: number };
    assert.equal(plain.warmup_iterations, DEFAULTS.warmupIterations);
  });

  it('refuses a bad warm-up or a bad limit in an entry with exit 2', async () => {
    for (const argv of [
      ['sim', '--warmup-iterations', '-1'],
      ['sim', '--warmup-iterations', 'x'],
      ['sim', '--mode', 'async', '--warmup-iterations', '1'],
      ['sim', '--compare', 'bf,bf@0'],
      ['run', '--transport', 'local', '--compare', 'bf,bf@-1'],
    ]) {
      const r = await baton(...argv).catch((e: Error) => ({ code: -1, out: e.message }));
      assert.equal(r.code, 2, argv.join(' '));
    }
  });
});
