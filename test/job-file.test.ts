import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { stringify as toYaml } from 'yaml';
import { batonInProcess } from './helpers-cli';
import { COMMAND_ONLY_FLAGS, JobCommand, keysOf } from '../cli/job-file-schema';
import { RUN_FLAGS } from '../cli/run-flags';
import { TRAIN_FLAGS } from '../cli/train-flags';
import { SIM_FLAGS } from '../cli/sim';
import { FlagSpec } from '../cli/args';

const baton = batonInProcess;

/** Two stages of a one-layer MLP of width 8, two microbatches of two samples, two iterations. */
const SMALL_TRAIN = [
  ...['--model', 'mlp', '--stages', '2', '--microbatches', '2', '--microbatch-size', '2'],
  ...['--layers', '2', '--width', '8', '--seq', '8', '--iterations', '2', '--val-batches', '1', '--seed', '7'],
];

describe('job files (--config, --print-config)', function () {
  this.timeout(120_000);
  let dir: string;
  before(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-jobfile-'))));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, text: string): string => {
    const f = path.join(dir, name);
    fs.writeFileSync(f, text);
    return f;
  };

  it('has a key for every flag of sim, run and train but those that only say what to print', () => {
    const specs: Record<JobCommand, readonly FlagSpec[]> = { sim: SIM_FLAGS, run: RUN_FLAGS, train: TRAIN_FLAGS };
    for (const [command, list] of Object.entries(specs) as [JobCommand, readonly FlagSpec[]][]) {
      const keyed = new Set(keysOf(command).map((k) => k.flag));
      for (const s of list)
        assert.ok(
          keyed.has(s.name) || COMMAND_ONLY_FLAGS.includes(s.name),
          `--${s.name} of ${command} has no key in cli/job-file-schema.ts (add one, or list it in COMMAND_ONLY_FLAGS)`,
        );
    }
  });

  it('reproduces a sim from its printed config, as JSON and as YAML, and flags override the file', async () => {
    const flags = ['--stages', '3', '--microbatches', '6', '--policy', '1f1b', '--jitter', 'paper', '--seed', '5'];
    const direct = await baton('sim', ...flags, '--json');
    assert.equal(direct.code, 0, direct.err);
    const printed = await baton('sim', ...flags, '--print-config');
    const json = file('sim.json', printed.out);
    const yaml = file('sim.yaml', toYaml(JSON.parse(printed.out)));
    for (const f of [json, yaml]) {
      const again = await baton('sim', '--config', f, '--json');
      assert.equal(again.code, 0, again.err);
      // Everything but the wall-clock time the simulation took.
      assert.deepEqual({ ...JSON.parse(again.out), wall_ms: 0 }, { ...JSON.parse(direct.out), wall_ms: 0 }, f);
    }
    const overridden = await baton('sim', '--config', yaml, '--policy', 'bf', '--json');
    assert.equal(JSON.parse(overridden.out).policy, 'bf');
    assert.equal(JSON.parse(overridden.out).stages, 3);
    // The printed config of a file and flags is the file with the flags applied.
    const reprinted = JSON.parse((await baton('sim', '--config', yaml, '--policy', 'bf', '--print-config')).out);
    assert.deepEqual(reprinted, { ...JSON.parse(printed.out), policy: { name: 'bf' } });
  });

  it("reproduces a train's param_checksum from its printed config", async () => {
    const direct = await baton('train', ...SMALL_TRAIN, '--json');
    assert.equal(direct.code, 0, direct.err);
    const printed = await baton('train', ...SMALL_TRAIN, '--print-config');
    const f = file('train.yaml', toYaml(JSON.parse(printed.out)));
    const again = await baton('train', '--config', f, '--json');
    assert.equal(again.code, 0, again.err);
    assert.equal(JSON.parse(again.out).param_checksum, JSON.parse(direct.out).param_checksum);
    const other = await baton('train', '--config', f, '--seed', '8', '--json');
    assert.notEqual(JSON.parse(other.out).param_checksum, JSON.parse(direct.out).param_checksum);
  });

  const refusals: [string, string, JobCommand, RegExp][] = [
    [
      'unknown.yaml',
      'shape:\n  stagez: 4\n',
      'sim',
      /shape\.stagez is not a key \(shape takes stages, microbatches, chunks, iterations, warmup_iterations, mode, tp, dp\)/,
    ],
    [
      'top.yaml',
      'stages: 4\n',
      'sim',
      /stages is not a key \(the top level takes job, shape, policy, profile, swaps, nodes, inject_faults, partition, placement\)/,
    ],
    ['type.yaml', 'shape:\n  stages: four\n', 'sim', /shape\.stages must be an integer >= 1, got "four"/],
    ['range.json', '{"shape": {"microbatches": 0}}', 'run', /shape\.microbatches must be an integer >= 1, got 0/],
    [
      'choice.yaml',
      'profile:\n  jitter: lots\n',
      'sim',
      /profile\.jitter must be one of none, compute, paper, got "lots"/,
    ],
    [
      'command.yaml',
      'profile:\n  jitter: compute\n',
      'train',
      /profile\.jitter: --jitter must be one of none, paper; got "compute"/,
    ],
    ['other.yaml', 'model:\n  layers: 4\n', 'sim', /model\.layers is not a key of baton sim \(it has no --layers\)/],
    ['section.yaml', 'shape: 3\n', 'sim', /shape must be a map of keys, got 3/],
    ['list.yaml', '- 1\n', 'sim', /must be a map of keys \(job, shape, policy, …\), got \[1\]/],
    ['broken.yaml', 'shape: {stages: 2\n', 'sim', /not YAML/],
    ['broken.json', '{"shape": ', 'sim', /not JSON/],
    ['twice.yaml', 'job: a\njob: b\n', 'sim', /not YAML: Map keys must be unique/],
  ];
  for (const [name, text, command, message] of refusals)
    it(`refuses a bad job file with exit 2 naming the key: ${name}`, async () => {
      const r = await baton(command, '--config', file(name, text), '--print-config');
      assert.equal(r.code, 2, r.err);
      assert.match(r.err, new RegExp(`^baton ${command}: JobFileError: job file \\S+${name}: `));
      assert.match(r.err, message);
    });

  it('refuses a job file that places a stage on a node it does not have, exit 2, naming the key', async () => {
    const f = file(
      'missing-node.yaml',
      'shape:\n  stages: 2\nnodes:\n  speeds: [1, 1]\nplacement:\n  "0": node5\n  "1": node0\n',
    );
    const r = await baton('sim', '--config', f, '--print-config');
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, /placement\.0: node "node5" is not one of the nodes \(node0, node1\)/);
  });

  it('refuses a job file that is not there or not a file', async () => {
    for (const [f, why] of [
      [path.join(dir, 'none.yaml'), /does not exist/],
      [dir, /is a directory, not a regular file/],
    ] as const) {
      const r = await baton('sim', '--config', f);
      assert.equal(r.code, 2);
      assert.match(r.err, why);
    }
  });
});
