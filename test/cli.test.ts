import { strict as assert } from 'assert';
import { ChildProcessByStdio, execFileSync, spawn } from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import { Readable } from 'stream';
import { batonInProcess } from './helpers-cli';
import { formatTapLine, printable, tapCommand, tapLine } from '../cli/tap';
import { comparedPaths } from '../cli/trace-output';
import { encodeValue } from '../transport/codec';
import { RUN_COMMAND_DEFAULTS, TRAIN_COMMAND_DEFAULTS } from '../job/defaults';
import { oneLayerProfile } from './helpers-profile';

/** Runs `baton argv` in a fresh Node process; true when it loaded @tensorflow/tfjs. */
function loadsTfjs(argv: string[]): boolean {
  const script = `
    const Module = require('module');
    const load = Module._load;
    let tfjs = false;
    Module._load = function (request, ...rest) {
      if (request.startsWith('@tensorflow/')) tfjs = true;
      return load.call(this, request, ...rest);
    };
    require(${JSON.stringify(path.join(__dirname, '..', 'cli', 'main.js'))}).main(${JSON.stringify(argv)}, () => {}).then((code) => {
      process.stdout.write(JSON.stringify({ code, tfjs }));
    });`;
  const r = JSON.parse(
    execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }),
  ) as { code: number; tfjs: boolean };
  assert.equal(r.code, 0, `baton ${argv.join(' ')} exited with ${r.code}`);
  return r.tfjs;
}

/** Directories tinyCorpus made: removed after the tests, whether they passed or not. */
const corpusDirs: string[] = [];

/** A corpus file too short for one training sample. */
function tinyCorpus(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-cli-'));
  corpusDirs.push(dir);
  const file = path.join(dir, 'tiny.txt');
  fs.writeFileSync(file, 'ab\n');
  return file;
}

/** The smallest train run: one stage of a one-layer MLP of width 8, one microbatch of two samples. */
const TINY_TRAIN = [
  'train',
  '--model',
  'mlp',
  '--stages',
  '1',
  '--microbatches',
  '1',
  '--microbatch-size',
  '2',
  '--layers',
  '1',
  '--width',
  '8',
];
/** TINY_TRAIN made to diverge: a learning rate of 1e30 with no warm-up, for 30 iterations. */
const DIVERGING_TRAIN = [...TINY_TRAIN, '--iterations', '30', '--val-batches', '1', '--lr', '1e30', '--warmup', '0'];
/** run in this process, two stages and two microbatches. */
const LOCAL_RUN = ['run', '--transport', 'local', '--stages', '2', '--microbatches', '2'];
/** sim of two stages and two microbatches. */
const SIM_2X2 = ['sim', '--stages', '2', '--microbatches', '2'];

/** baton in a child process, its stdout and stderr piped. */
function spawnBaton(...argv: string[]): ChildProcessByStdio<null, Readable, Readable> {
  return spawn(process.execPath, [path.join(__dirname, '..', 'cli', 'main.js'), ...argv], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

const baton = batonInProcess;

describe('the baton command', function () {
  after(() => {
    for (const d of corpusDirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
  });
  this.timeout(60_000);

  it('prints the sim JSON contract', async () => {
    const r = await baton('sim', '--stages', '4', '--microbatches', '8', '--iterations', '2', '--json');
    assert.equal(r.code, 0);
    const j = JSON.parse(r.out);
    for (const k of [
      'policy',
      'stages',
      'microbatches',
      'chunks',
      'seed',
      'iterations',
      'makespan_ms',
      'lower_bound_ms',
      'efficiency',
      'bubble_fraction',
      'peak_inflight',
      'tasks',
    ])
      assert.ok(k in j, `missing ${k}`);
    assert.equal(j.iterations.length, 2);
    assert.ok('makespan_ms' in j.iterations[0] && 'lower_bound_ms' in j.iterations[0]);
    assert.equal(j.makespan_ms, 330);
    assert.equal(j.peak_inflight.length, 4);
  });

  it('compares policies on the same seed, as a table and as a JSON list', async () => {
    const t = await baton('sim', '--stages', '4', '--microbatches', '8', '--jitter', 'paper', '--compare', '1f1b,bf');
    assert.equal(t.code, 0);
    assert.match(t.out, /speedup vs 1f1b/);
    const j = JSON.parse(
      (
        await baton(
          'sim',
          '--stages',
          '4',
          '--microbatches',
          '8',
          '--jitter',
          'paper',
          '--compare',
          '1f1b,bf',
          '--json',
        )
      ).out,
    );
    assert.deepEqual(
      j.map((x: { policy: string }) => x.policy),
      ['1f1b', 'bf'],
    );
    assert.equal(j[0].speedup, 1);
  });

  it('refuses bad arguments with a clear error and exit code 2', async () => {
    const tiny = tinyCorpus();
    const cases: [string[], RegExp][] = [
      [['sim', '--stages', 'x'], /--stages must be an integer, got "x"/],
      [['sim', '--stages', '0'], /--stages must be a positive integer/],
      [['sim', '--bogus'], /unknown flag --bogus/],
      [['sim', '--jitter', 'huge'], /--jitter must be one of none, compute, paper/],
      [['sim', '--policy', 'nope'], /unknown policy/],
      [
        ['sim', '--policy', 'interleaved-1f1b', '--chunks', '2', '--stages', '4', '--microbatches', '6'],
        /microbatches = 6, stages = 4/,
      ],
      [['sim', '--profile', 'no-such-profile'], /unknown profile/],
      [['sim', '--microbatches'], /needs a value/],
      [['train', '--model', 'rnn'], /--model must be one of gpt, mlp/],
      [['train', '--warmup', '-5'], /--warmup must be an integer >= 0, got -5/],
      [['train', '--seed', '-1'], /--seed must be an integer >= 0, got -1/],
      [['train', '--mode', 'async', '--snapshot-every', '-1'], /--snapshot-every must be an integer >= 0, got -1/],
      [['train', '--model', 'mlp', '--data', tiny], /the train split has \d+ characters, a sample needs 65/],
      [['run', '--transport', 'local', '--nodes', 'a'], /need --transport nats/],
      [
        ['run', '--stall-timeout', '2147483648'],
        /run: --stall-timeout must be between 1 and 2147483647 ms \(the longest timer Node keeps\), got 2147483648/,
      ],
      // Refused by the launcher itself, before it starts a nats-server or a stage process.
      [['run', '--profile', 'no-such-profile'], /^baton run: ProfileError: unknown profile/],
      [['run', '--policy', 'nope', '--stages', '2', '--microbatches', '2'], /^baton run: UnknownPolicyError/],
      [['sim', '--stages', '2', 'stray'], /sim: unexpected argument "stray"/],
      [['sim', '-microbatches', '4'], /sim: unexpected argument "-microbatches"/],
      [['run', '--json', 'true'], /run: unexpected argument "true"/],
      [['tap', '--job', 'j', 'extra'], /tap: unexpected argument "extra"/],
      [['tap', '--job', 'j', '--timeout', '3000000'], /tap: --timeout must be between 0 and 2147483 seconds/],
      [['tap', '--job', 'j', '--count', '-1'], /tap: --count must be an integer >= 0, got -1/],
      [['tap', '--job', 'x'.repeat(200)], /job name "x+\.\.\. must be a string matching .* of at most 128 characters/],
      [
        ['run', '--job', '_nodes', '--stages', '2', '--microbatches', '2'],
        /job name "_nodes": names starting with _ are reserved for Baton's own subjects/,
      ],
      [['tap', '--job', '_jobs'], /job name "_jobs": names starting with _ are reserved/],
      [
        ['sim', '--stages', '2', '--microbatches', '2', '--trace', '/nonexistent/dir/t.json'],
        /sim: --trace \/nonexistent\/dir\/t\.json: directory \/nonexistent\/dir does not exist/,
      ],
      [
        ['run', '--stages', '2', '--microbatches', '2', '--gantt', os.tmpdir()],
        /run: --gantt .*: is a directory; give a file path/,
      ],
      [
        ['sim', '--stages', '2', '--microbatches', '2', '--trace', '/proc/baton-x.json'],
        /sim: --trace \/proc\/baton-x\.json: cannot be created: ENOENT/,
      ],
      [
        ['train', '--model', 'mlp', '--checkpoint', path.join(tiny, 'ckpt')],
        /train: --checkpoint .*tiny\.txt\/ckpt: cannot be created/,
      ],
      [
        ['train', '--model', 'mlp', '--checkpoint', '/sys/baton-nope'],
        /train: --checkpoint \/sys\/baton-nope: cannot be created/,
      ],
      // Node's recursive mkdir spins forever on this one (ENOENT under an existing /proc).
      [
        ['train', '--model', 'mlp', '--checkpoint', '/proc/baton-nope/deeper'],
        /train: --checkpoint \/proc\/baton-nope\/deeper: cannot be created: ENOENT/,
      ],
      [['trace', 'gantt', 'x.json', '-o', os.tmpdir()], /trace gantt: -o .*: is a directory/],
      [
        ['sim', '--mode', 'async', '--chunks', '2', '--stages', '2', '--microbatches', '4'],
        /JobConfigError: asynchronous mode runs one chunk per stage/,
      ],
      [
        ['sim', '--jitter', 'paper', '--jitter-scale', '1e308'],
        /--jitter-scale must be between 0 and 100, got 1e\+308/,
      ],
      [['train', '--model', 'mlp', '--mode', 'async', '--beta1', '-5'], /train: --beta1 must be in \[0, 1\), got -5/],
      [
        ['train', '--width', '100000', '--heads', '1'],
        /ModelConfigError: gpt config: \d+ parameters \(--layers 4, --width 100000\), over the limit of 268435456/,
      ],
      [
        ['train', '--stages', '1', '--microbatch-size', '100000000'],
        /ModelConfigError: gpt config: a microbatch's activations are \d+ values \(--microbatch-size 100000000, .*over the limit of 67108864/,
      ],
      [['train', '--model', 'mlp', '--nats', 'nats://127.0.0.1:4222'], /train: --nats needs --transport nats/],
      // Refused before the training: validation runs after it, and 10^8 batches would take days.
      [
        ['train', '--model', 'mlp', '--val-batches', '100000000'],
        /train: --val-batches must be at most 262144, got 100000000/,
      ],
      [
        ['run', '--transport', 'nats', '--nodes', 'a', '--processes', 'single'],
        /run: --nodes runs the stages on those nodes; it takes no --processes single/,
      ],
      [
        ['run', '--nats', 'nats://127.0.0.1:1', '--nodes', 'a,b,c', '--stages', '2'],
        /run: --nodes names 3 agents for 2 stages; each agent hosts at least one stage, so c would get none/,
      ],
      [
        ['run', '--compare', 'bf,1f1b', '--job', 'x'.repeat(127)],
        /run: --compare runs policy k as job x+-k; job name "x+\.\.\. must be a string .* of at most 128 characters/,
      ],
      [[], /baton: a command is required/],
      [
        ['sim', '--microbatches', '100000000'],
        /ShapeError: chunks × microbatches .* must be at most 262144, got 100000000/,
      ],
      [
        ['sim', '--stages', '64', '--microbatches', '1024', '--iterations', '100'],
        /JobConfigError: stages × chunks × microbatches × ranks × replicas × iterations \(warm-up included\) must be at most 2097152, got 65536 × 100 = 6553600/,
      ],
      [
        ['run', '--compare', 'bf,bogus', '--stages', '2', '--microbatches', '2'],
        /^baton run: UnknownPolicyError: unknown policy "bogus"/,
      ],
      [
        ['sim', '--stages', '4', '--microbatches', '8', '--compare', 'bf,1f1b,interleaved-1f1b'],
        /^baton sim: ShapeError: interleaved-1f1b needs chunks >= 2/,
      ],
      [['sim', '--policy', 'nope', '--print-config'], /^baton sim: UnknownPolicyError: unknown policy "nope"/],
      [
        ['sim', '--policy', 'fb', '--compare', 'bf,1f1b'],
        /sim: --compare runs each policy it lists; give --policy or --compare, not both/,
      ],
      [
        ['run', '--policy', 'fb', '--compare', 'bf,1f1b'],
        /run: --compare runs each policy it lists; give --policy or --compare, not both/,
      ],
      [['run', '--policy', 'nope', '--print-config'], /^baton run: UnknownPolicyError: unknown policy "nope"/],
      [['run', '--transport', 'local', '--job', 'a.b'], /^baton run: UsageError: run: --job: job name "a\.b" must be/],
      [
        ['run', '--stages', '65', '--microbatches', '2'],
        /run: --processes per-stage starts 65 stage processes on this machine .* at most 64: use --processes single, or --nodes/,
      ],
      [
        [
          'run',
          '--stages',
          '8',
          '--microbatches',
          '256',
          '--iterations',
          '1',
          '--warmup-iterations',
          '2000',
          '--print-config',
        ],
        /iterations \(warm-up included\) must be at most 2097152, got 2048 × 2001 = 4098048/,
      ],
      [
        ['run', '--mode', 'async', '--warmup-iterations', '2'],
        /run: asynchronous mode runs one stream of microbatches; it has no warm-up iteration/,
      ],
      [['run', '--nodes', '*'], /--nodes: node names match \[A-Za-z0-9_-\]\+/],
      // A name whose subject (baton._nodes.<name>) the bus would refuse is a bad flag, not a failed job.
      [
        ['run', '--nodes', 'n'.repeat(1100)],
        /run: --nodes: a node name is at most 1011 characters \(as baton node --name\), got one of 1100/,
      ],
      [
        ['node', '--nats', 'nats://127.0.0.1:1', '--name', 'n'.repeat(1100)],
        /node: --name is 1100 characters, over the 1011 its subject \(baton\._nodes\.<name>\) has room for/,
      ],
      [['run', '--nodes', 'a,b,a'], /--nodes names a node twice/],
      [['run', '--nodes', 'a,b'], /run: --nodes needs --nats URL, the server those node agents joined/],
      [
        ['run', '--transport', 'local', '--processes', 'per-stage'],
        /run: --transport local runs every stage in this process; --processes needs --transport nats/,
      ],
      [
        ['train', '--model', 'mlp', '--processes', 'per-stage'],
        /train: --transport local runs every stage in this process; --processes needs --transport nats/,
      ],
      [
        ['train', '--model', 'mlp', '--clock', 'virtual', '--processes', 'single'],
        /train: --transport local runs every stage in this process; --processes needs --transport nats/,
      ],
      [
        ['sim', '--trace', '--json'],
        /sim: --trace needs a value \(FILE\.json\), got the flag "--json"; write --trace=VALUE/,
      ],
      [
        ['train', '--model', 'mlp', '--consistency', 'fresco', '--alpha', '0.5'],
        /train: --consistency, --alpha set the asynchronous parameter stores; add --mode async/,
      ],
      [['tap', '--job', 'j', '--all'], /tap: --job J watches one job, --all every job; give one of them/],
      [['sim', '--buffer-limit', 'deep'], /--buffer-limit must be a positive integer or depth, got "deep"/],
      [['sim', '--buffer-limit', '0'], /--buffer-limit must be a positive integer or depth, got "0"/],
      // A --nats that does not parse is a usage error naming the entry, and never shows a password.
      [
        ['tap', '--job', 'j', '--nats', 'nats://127.0.0.1:99999'],
        /tap: --nats "nats:\/\/127\.0\.0\.1:99999" is not a URL \(expected nats:\/\/host:port\)/,
      ],
      [['tap', '--job', 'j', '--nats', ''], /tap: --nats "" names no server$/m],
      [
        ['tap', '--job', 'j', '--nats', 'http://alice:s3cret@127.0.0.1:4222'],
        /tap: --nats entry 1: the scheme must be nats:\/\/ or tls:\/\/, not http:\/\/\n/,
      ],
      [
        ['tap', '--job', 'j', '--nats', 'tls://127.0.0.1:4222,127.0.0.1:4223'],
        /tap: --nats "127\.0\.0\.1:4223": the servers of one --nats value are all tls:\/\/ or none/,
      ],
      [['node', '--nats', 'a b'], /node: --nats "a b" is not a URL/],
      [['run', '--nats', 'nats://127.0.0.1:4222,'], /run: --nats entry 2 is empty$/m],
      [
        ['train', '--model', 'mlp', '--transport', 'nats', '--nats', 'nats://[::1'],
        /train: --nats "nats:\/\/\[::1" is not a URL/,
      ],
    ];
    for (const [argv, re] of cases) {
      const r = await baton(...argv);
      assert.equal(r.code, 2, `${argv.join(' ')}: exit ${r.code}, stderr ${r.err}`);
      assert.match(r.err, re, argv.join(' '));
    }
    // A refusal leaves no checkpoint directory behind (it is created only once the flags pass).
    const never = path.join(path.dirname(tiny), 'never-made');
    const refused = await baton('train', '--model', 'mlp', '--mode', 'async', '--checkpoint', never);
    assert.equal(refused.code, 2);
    assert.match(refused.err, /checkpoints are only written in synchronous mode/);
    assert.equal(fs.existsSync(never), false);
    // A directory that holds a checkpoint is continued with --resume, never overwritten by a new run.
    const held = path.join(path.dirname(tiny), 'held');
    fs.mkdirSync(held);
    fs.writeFileSync(path.join(held, 'meta.json'), '{}');
    const overwrite = await baton('train', '--model', 'mlp', '--checkpoint', held);
    assert.equal(overwrite.code, 2);
    assert.match(
      overwrite.err,
      /held already holds a checkpoint; add --resume to continue it, or give another directory/,
    );
    // So does a refusal of what only the run itself checks (the backend, the model's shape).
    for (const bad of [
      ['--backend', 'bogus'],
      ['--model', 'gpt', '--width', '30', '--heads', '4'],
    ]) {
      // Every level it made goes, not only the last.
      const late = await baton('train', '--model', 'mlp', ...bad, '--checkpoint', path.join(never, 'deeper'));
      assert.equal(late.code, 2, late.err);
      assert.equal(fs.existsSync(never), false, `${bad.join(' ')} left ${never}`);
    }
    const missingModule = await baton('sim', '--policy', './no-such-policy.js');
    assert.equal(missingModule.code, 2);
    assert.equal(missingModule.err.trim().split('\n').length, 1, `one line: ${missingModule.err}`);
    // Names an object has from its prototype are no commands either.
    for (const name of ['frobnicate', 'constructor', '__proto__', 'toString']) {
      const unknown = await baton(name);
      assert.equal(unknown.code, 2, unknown.err);
      assert.match(unknown.err, new RegExp(`unknown command "${name}"`));
    }
  });

  it('refuses BATON_STAGE_NODE_FLAGS that are not flags before it starts a nats-server or a stage process', async () => {
    const saved = process.env.BATON_STAGE_NODE_FLAGS;
    process.env.BATON_STAGE_NODE_FLAGS = '--max-old-space-size 100';
    try {
      for (const argv of [
        ['run', '--stages', '2', '--microbatches', '2'],
        ['run', '--stages', '2', '--microbatches', '2', '--print-config'],
        ['train', '--model', 'mlp', '--transport', 'nats', '--iterations', '1'],
      ]) {
        const r = await baton(...argv);
        assert.equal(r.code, 2, `${argv.join(' ')}: exit ${r.code}, stderr ${r.err}`);
        assert.match(
          r.err,
          /^baton (run|train): UsageError: BATON_STAGE_NODE_FLAGS: every word must be a Node flag starting with -, got "100"/,
          argv.join(' '),
        );
      }
    } finally {
      if (saved === undefined) delete process.env.BATON_STAGE_NODE_FLAGS;
      else process.env.BATON_STAGE_NODE_FLAGS = saved;
    }
  });

  it('answers --help for every command and lists them all', async () => {
    const top = await baton('--help');
    for (const c of ['sim', 'run', 'train', 'node', 'tap', 'trace']) {
      assert.match(top.out, new RegExp(`\\b${c}\\b`));
      for (const flag of ['--help', '-h']) {
        const r = await baton(c, flag);
        assert.equal(r.code, 0, `${c} ${flag}`);
        assert.match(r.out, /Usage:/, `${c} ${flag}`);
      }
      const viaHelp = await baton('help', c);
      assert.equal(viaHelp.code, 0, `help ${c}`);
      assert.equal(viaHelp.out, (await baton(c, '--help')).out, `baton help ${c} is baton ${c} --help`);
    }
    for (const sub of ['gantt', 'check', 'summary']) {
      const viaHelp = await baton('help', 'trace', sub);
      assert.equal(viaHelp.code, 0, `help trace ${sub}`);
      assert.match(
        viaHelp.out,
        new RegExp(`^baton trace ${sub} — `),
        `baton help trace ${sub} is baton trace ${sub} --help`,
      );
    }
    assert.match((await baton('node', '--help')).out, /\(default node-<pid>\)/);
    assert.match(
      (await baton('node', '--help')).out,
      /--json +print one JSON line when ready \(\{node, pid, nats, ready: true\}\)/,
    );
    assert.match(
      (await baton('node', '--help')).out,
      /--allow-files PATH,… +the files and directories whose policy modules, profile files, training corpora and checkpoints a launcher may name/,
    );
  });

  it('loads TensorFlow.js only for commands that compute with it (a node agent starts without it)', () => {
    assert.equal(loadsTfjs(['sim', '--stages', '2', '--microbatches', '4', '--iterations', '1', '--json']), false);
    assert.equal(
      loadsTfjs(['sim', '--stages', '2', '--microbatches', '4', '--iterations', '1', '--mode', 'async', '--json']),
      false,
    );
    assert.equal(loadsTfjs(['node', '--help']), false);
    assert.equal(loadsTfjs([...TINY_TRAIN, '--iterations', '1', '--val-batches', '1', '--json']), true);
  });

  it('stops quietly with status 0 when the reader of its output has gone (baton … | head)', async () => {
    const child = spawnBaton('sim', '--stages', '8', '--microbatches', '64', '--json');
    child.stdout.destroy();
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.equal(err, '');
    assert.equal(code, 0);
  });

  it('goes on to its result when the reader of its stderr has gone', async function () {
    this.timeout(60_000);
    // Over NATS, run writes to stderr where its private server is before the job starts.
    const child = spawnBaton('run', '--stages', '2', '--microbatches', '2', '--json');
    child.stderr.destroy();
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.equal(code, 0);
    assert.equal(JSON.parse(out).tasks, 8);
  });

  it('writes one trace and one chart per compared policy, the first at the given paths', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-compare-'));
    try {
      const outputs = ['--trace', path.join(dir, 't.json'), '--gantt', path.join(dir, 'g.svg')];
      const r = await baton(...SIM_2X2, '--compare', 'bf,1f1b,hint:1f1b', ...outputs);
      assert.equal(r.code, 0, r.err);
      assert.deepEqual(fs.readdirSync(dir).sort(), [
        'g.1f1b.svg',
        'g.hint_1f1b.svg',
        'g.svg',
        't.1f1b.json',
        't.hint_1f1b.json',
        't.json',
      ]);
      const policyOf = (f: string) =>
        (JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as { metadata: { config: { policy: string } } })
          .metadata.config.policy;
      assert.deepEqual(['t.json', 't.1f1b.json', 't.hint_1f1b.json'].map(policyOf), ['bf', '1f1b', 'hint:1f1b']);
      assert.match(r.out, /wrote .*t\.hint_1f1b\.json/);
      assert.deepEqual(comparedPaths('o/t.json', ['bf', 'a:b', 'a_b', 'bf']), [
        'o/t.json',
        'o/t.a_b.json',
        'o/t.2.json',
        'o/t.bf.json',
      ]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('writes --trace through a link to a file that does not exist yet', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-link-'));
    try {
      const link = path.join(dir, 'trace.json');
      fs.symlinkSync(path.join(dir, 'target.json'), link);
      const r = await baton(...SIM_2X2, '--trace', link, '--json');
      assert.equal(r.code, 0, r.err);
      assert.ok(fs.statSync(path.join(dir, 'target.json')).size > 0);
      // Where the link leads is checked before the run; so is a loop of links.
      const astray = path.join(dir, 'astray.json');
      fs.symlinkSync('/nonexistent-baton/dir/x.json', astray);
      const a = await baton(...SIM_2X2, '--trace', astray);
      assert.equal(a.code, 2);
      assert.match(
        a.err,
        /--trace \/nonexistent-baton\/dir\/x\.json: directory \/nonexistent-baton\/dir does not exist/,
      );
      fs.symlinkSync(path.join(dir, 'loop2'), path.join(dir, 'loop1'));
      fs.symlinkSync(path.join(dir, 'loop1'), path.join(dir, 'loop2'));
      const l = await baton(...SIM_2X2, '--gantt', path.join(dir, 'loop1'));
      assert.equal(l.code, 2);
      assert.match(l.err, /--gantt .*loop1: a loop of symbolic links/);
      // Two outputs of one run never share a file (the chart would overwrite the trace).
      const clash = ['--trace', path.join(dir, 't.json'), '--gantt', path.join(dir, 't.1f1b.json')];
      const same = await baton(...SIM_2X2, '--compare', 'bf,1f1b', ...clash);
      assert.equal(same.code, 2);
      assert.match(same.err, /--gantt .*t\.1f1b\.json is the file --trace .*t\.1f1b\.json is written to as well/);
      // The same file through a linked directory is the same file.
      fs.mkdirSync(path.join(dir, 'd1'));
      fs.symlinkSync(path.join(dir, 'd1'), path.join(dir, 'd2'));
      const linked = await baton(
        ...SIM_2X2,
        '--trace',
        path.join(dir, 'd1', 'x.out'),
        '--gantt',
        path.join(dir, 'd2', 'x.out'),
      );
      assert.equal(linked.code, 2);
      assert.match(linked.err, /--gantt .*d2\/x\.out is the file --trace .*d1\/x\.out is written to as well/);
      // A profile of zero durations: two empty runs are equally fast, not NaN times faster.
      const zero = path.join(dir, 'zero.json');
      fs.writeFileSync(zero, JSON.stringify(oneLayerProfile('no work', { name: 'b', count: 4, forwardMs: 0 }, 2, 0)));
      const z = await baton(...SIM_2X2, '--profile', zero, '--compare', 'bf,1f1b', '--json');
      assert.equal(z.code, 0, z.err);
      assert.deepEqual(
        (JSON.parse(z.out) as { speedup: number }[]).map((r) => r.speedup),
        [1, 1],
      );
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('exits with status 1 when --nats names a listener that never speaks NATS (nats.js leaves that socket open)', async function () {
    this.timeout(30000);
    const silent = net.createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as net.AddressInfo).port;
    try {
      const child = spawnBaton('tap', '--nats', `nats://127.0.0.1:${port}`, '--job', 'x');
      let err = '';
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      const t0 = Date.now();
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      assert.equal(code, 1, err);
      assert.match(err, /NatsBusError: cannot connect to NATS at nats:\/\/127\.0\.0\.1:\d+: timeout/);
      assert.ok(Date.now() - t0 < 15000, `took ${Date.now() - t0} ms`);
    } finally {
      silent.close();
    }
  });

  it('tap gives up, with status 1, on a server that takes the connection and then never answers', async function () {
    this.timeout(30000);
    // Speaks just enough NATS to connect (INFO, then PONG to the handshake's PING), then nothing.
    const stalling = net.createServer((sock) => {
      sock.write('INFO {"server_id":"x","version":"2.9.0","max_payload":1048576,"headers":true}\r\n');
      let ponged = false;
      sock.on('data', (d: Buffer) => {
        if (!ponged && d.toString().includes('PING')) {
          ponged = true;
          sock.write('PONG\r\n');
        }
      });
      sock.on('error', () => {});
    });
    await new Promise<void>((resolve) => stalling.listen(0, '127.0.0.1', resolve));
    const port = (stalling.address() as net.AddressInfo).port;
    const errs: string[] = [];
    try {
      const t0 = Date.now();
      await assert.rejects(
        tapCommand(
          ['--nats', `nats://alice:s3cret@127.0.0.1:${port}`, '--job', 'x', '--timeout', '3'],
          () => {},
          (l) => errs.push(l),
          800,
        ),
        /NatsBusError: the NATS server at nats:\/\/\*\*\*@127\.0\.0\.1:\d+ did not confirm the subscription within 0\.8 s/,
      );
      assert.ok(Date.now() - t0 < 10000, `took ${Date.now() - t0} ms`);
      assert.ok(!errs.join('\n').includes('s3cret'), errs.join('\n'));
      // A shorter --timeout bounds the wait too.
      await assert.rejects(
        tapCommand(
          ['--nats', `127.0.0.1:${port}`, '--job', 'x', '--timeout', '0.5'],
          () => {},
          () => {},
        ),
        /did not confirm the subscription within 0\.5 s/,
      );
    } finally {
      stalling.close();
    }
  });

  it('tap writes control characters from the network as \\u escapes, never raw to the terminal', () => {
    const line = tapLine('baton.j.x\u001b[31mred', encodeValue({ verb: '\u001b[2JPWNED' }));
    const text = formatTapLine(line);
    assert.ok(!/[\u0000-\u001f\u007f-\u009f]/.test(text), JSON.stringify(text));
    assert.match(text, /baton\.j\.x\\u001b\[31mred/);
    const node = formatTapLine(tapLine('baton._nodes.n1', encodeValue({ verb: '\u001b[2J\u009bPWNED' })));
    assert.match(node, /baton\._nodes\.n1 {2}\\u001b\[2J\\u009bPWNED/);
    assert.equal(printable('plain ascii, ünïcödé'), 'plain ascii, ünïcödé');
  });

  it("tap names a launcher's job-name claim as such, not as a malformed message", () => {
    assert.deepEqual(tapLine('baton.tt.claim', encodeValue({ reply: 'baton.tt.claim.reply.x', token: 'a' })), {
      subject: 'baton.tt.claim',
      kind: 'job-claim',
      bytes: 40,
    });
    assert.equal(tapLine('baton.tt.claim.reply.x', encodeValue({ job: 'tt' })).kind, 'job-claim');
    assert.equal(tapLine('baton.tt.node.tt-stage0-ab', encodeValue({ verb: 'host' })).kind, 'host');
    assert.equal(tapLine('baton.tt.data.0', new Uint8Array([1, 2, 3])).kind, 'malformed');
  });

  it('a Ctrl-C the moment run creates its nats-server directory leaves nothing behind', async function () {
    this.timeout(30000);
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-sigint-'));
    try {
      const child = spawn(
        process.execPath,
        [path.join(__dirname, '..', 'cli', 'main.js'), 'run', '--stages', '2', '--microbatches', '4'],
        { stdio: 'ignore', env: { ...process.env, TMPDIR: tmp } },
      );
      const watcher = fs.watch(tmp, () => {
        watcher.close();
        child.kill('SIGINT');
      });
      const signal = await new Promise<string | null>((resolve) => child.once('exit', (_code, sig) => resolve(sig)));
      watcher.close();
      assert.equal(signal, 'SIGINT');
      assert.deepEqual(fs.readdirSync(tmp), []);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('tap calls a trace message without an events list malformed', () => {
    for (const bytes of [new Uint8Array([0x05]), new Uint8Array([0xa0]), encodeValue({ verb: 'x' })])
      assert.equal(tapLine('baton.tt.trace.0', bytes).kind, 'malformed');
    assert.equal(tapLine('baton.tt.trace.0', encodeValue({ events: [] })).kind, 'trace');
    // The claim of a job named `trace`, or a request to a node named `trace`, is no trace batch.
    assert.equal(
      tapLine('baton.trace.claim', encodeValue({ reply: 'baton.trace.claim.reply.x', token: 'a' })).kind,
      'job-claim',
    );
    assert.equal(tapLine('baton._nodes.trace', encodeValue({ verb: 'ping' })).kind, 'ping');
    assert.equal(tapLine('baton.tt.node.trace', encodeValue({ verb: 'ping' })).kind, 'ping');
  });

  it('train fails (status 1) when the loss is no longer finite, after printing what it did', async () => {
    const r = await baton(...DIVERGING_TRAIN, '--json');
    assert.equal(r.code, 1, r.err);
    assert.equal((JSON.parse(r.out) as { final_loss: unknown }).final_loss, null);
    assert.match(
      r.err,
      /baton train: the loss is not finite \(final NaN, validation NaN\): the run diverged; lower --lr/,
    );
  });

  it('train that diverges before its first checkpoint does not say the directory keeps one', async () => {
    const dir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'baton-cli-')), 'ckpt');
    corpusDirs.push(path.dirname(dir));
    const r = await baton(...DIVERGING_TRAIN, '--checkpoint', dir);
    assert.equal(r.code, 1, r.err);
    assert.doesNotMatch(r.err, /keeps the last one/);
    assert.match(r.err, /no checkpoint written, and .*ckpt holds none/);
    assert.match(r.out, /checkpoint: .*ckpt \(none written: the parameters were never finite\)/);
    assert.equal(fs.existsSync(dir), false, 'the directory made for the run goes');
  });

  it('reports the model seed as seed and the jitter seed as jitter_seed in train --json', async () => {
    const r = await baton(
      ...TINY_TRAIN,
      '--iterations',
      '1',
      '--val-batches',
      '1',
      '--seed',
      '7',
      '--jitter-seed',
      '3',
      '--json',
    );
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as { seed: number; jitter_seed: number };
    assert.deepEqual([j.seed, j.jitter_seed], [7, 3]);
  });

  it("leaves the warm-up iteration out of run's tasks, messages and bytes, as out of its makespan", async () => {
    const counts = async (...extra: string[]) => {
      const r = await baton(...LOCAL_RUN, '--iterations', '2', '--json', ...extra);
      assert.equal(r.code, 0, r.err);
      const j = JSON.parse(r.out) as { tasks: number; messages: number; iterations: unknown[] };
      return [j.tasks, j.messages, j.iterations.length];
    };
    assert.deepEqual(await counts(), [2 * 8, 2 * 4, 2]);
    assert.deepEqual(await counts('--warmup-iterations', '0'), [2 * 8, 2 * 4, 2]);
  });

  it('prints a list for --compare, with one policy too, as sim does', async () => {
    const r = await baton(...LOCAL_RUN, '--iterations', '1', '--compare', 'bf', '--json');
    assert.equal(r.code, 0, r.err);
    const rows = JSON.parse(r.out) as { policy: string; speedup: number }[];
    assert.deepEqual(
      rows.map((x) => [x.policy, x.speedup]),
      [['bf', 1]],
    );
  });

  it('prints the job-file form of the resolved flags', async () => {
    const r = await baton('sim', '--stages', '3', '--policy', 'fb', '--print-config');
    const cfg = JSON.parse(r.out);
    assert.equal(cfg.shape.stages, 3);
    assert.equal(cfg.policy.name, 'fb');
    assert.equal(cfg.profile.jitter_scale, 1);
  });

  it('prints one job-file form in sim, run and train, differing for the same flags only where a command documents its own default', async () => {
    const flags = ['--stages', '3', '--microbatches', '6', '--policy', 'fb', '--print-config'];
    const [sim, run, train] = await Promise.all(
      (['sim', 'run', 'train'] as const).map(async (c) => JSON.parse((await baton(c, ...flags)).out)),
    );
    const common = ['job', 'shape', 'policy', 'profile', 'swaps'];
    const placed = ['inject_faults', 'partition', 'placement'];
    assert.deepEqual(Object.keys(sim), [...common, ...placed]);
    assert.deepEqual(Object.keys(run), [...common, 'transport', ...placed]);
    assert.deepEqual(Object.keys(train), [...common, 'model', 'training', 'async', 'transport', ...placed]);
    assert.deepEqual({ ...run.shape, warmup_iterations: undefined }, { ...sim.shape, warmup_iterations: undefined });
    assert.equal(run.shape.warmup_iterations, RUN_COMMAND_DEFAULTS.warmupIterations);
    assert.deepEqual([run.profile, run.policy], [sim.profile, sim.policy]);
    for (const k of ['stages', 'microbatches'] as const) assert.equal(train.shape[k], sim.shape[k]);
    assert.equal(train.policy.name, sim.policy.name);
    assert.equal(train.transport.name, TRAIN_COMMAND_DEFAULTS.transport);
  });

  it("prints train's resolved config, its NATS credentials hidden, and makes no checkpoint directory for it", async () => {
    const dir = path.join(os.tmpdir(), `baton-printcfg-${process.pid}`);
    const r = await baton(
      'train',
      '--model',
      'mlp',
      '--stages',
      '3',
      '--policy',
      '1f1b',
      '--checkpoint',
      dir,
      '--transport',
      'nats',
      '--nats',
      'nats://alice:s3cret@127.0.0.1:4222',
      '--print-config',
    );
    assert.equal(r.code, 0, r.err);
    const cfg = JSON.parse(r.out);
    assert.deepEqual(
      [cfg.shape.stages, cfg.policy.name, cfg.model.name, cfg.training.checkpoint, cfg.transport.name],
      [3, '1f1b', 'mlp', dir, 'nats'],
    );
    assert.equal(cfg.transport.nats, 'nats://***@127.0.0.1:4222');
    assert.ok(!r.out.includes('s3cret'));
    assert.ok(!fs.existsSync(dir), `${dir} was made`);
  });
});
