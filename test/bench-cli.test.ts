import { strict as assert } from 'assert';
import { spawn, spawnSync } from 'child_process';
import { readFileSync } from 'fs';
import * as path from 'path';
import { parseFlags } from '../cli/args';

const bench = (...argv: string[]) =>
  spawnSync(process.execPath, [path.join(__dirname, '..', 'bench', 'run.js'), ...argv], { encoding: 'utf8' });

describe("the benchmarks' command line", () => {
  it("gives a list flag's default as a list, as if it had been given", () => {
    const specs = [{ name: 'stages', type: 'list' as const, default: '2,4,8', help: 'depths' }];
    assert.deepEqual(parseFlags([], specs, 'x').flags.stages, ['2', '4', '8']);
    assert.deepEqual(parseFlags(['--stages', '8'], specs, 'x').flags.stages, ['8']);
  });

  it('prints help without running, and refuses bad flags with exit 2 and one line', () => {
    const help = bench('bus', '--help');
    assert.equal(help.status, 0);
    assert.match(help.stdout, /Usage: npm run bench -- bus \[--mb MB\]/);
    assert.match(
      bench('sim', '--help').stdout,
      /Usage: npm run bench -- sim \[--reference none\|offline\] \[--json\]\n/,
    );
    // Through plain `npm run`, npm's own lines come first on stdout: the help says how to get the JSON alone.
    assert.match(
      bench('sim', '--help').stdout,
      /--json +print one JSON object \(npm run -s bench -- … keeps npm's own lines off stdout\)/,
    );
    assert.match(bench('--help').stdout, /with --json, npm run -s bench -- …/);
    // Every flag with a default shows it.
    assert.match(
      bench('train', '--help').stdout,
      /--iterations N +training iterations per measurement, at least 2 .*\(default 5\)\n +--layers L +model layers, at least 2 \(default 8\)/,
    );
    for (const [argv, re] of [
      [
        ['bus', '--mb', '0.1'],
        /--mb must be a size from 4 bytes to 48 MiB that is a whole number of float32 values, got 0\.1/,
      ],
      [['bus', '--messages', '0'], /--messages must be a positive integer, got 0/],
      [['bus', '--mb', 'abc'], /--mb must be a decimal number, got "abc"/],
      [['bus', '--mb', '0x10'], /--mb must be a decimal number, got "0x10"/],
      [['bus', '--processes', '3'], /--processes must be 1, 2 or both, got "3"/],
      [['train', '--rounds', '-1'], /--rounds must be a positive integer, got -1/],
      [
        ['train', '--iterations', '1'],
        /--iterations must be at least 2 \(the first of each measurement is discarded\), got 1/,
      ],
      [['overhead', '--stages', '2,x'], /--stages must list integers from 2 to 64, got 2,x/],
      [['overhead', '--stages', '1'], /--stages must list integers from 2 to 64, got 1/],
      [['overhead', '--stages', '1e1'], /--stages must list integers from 2 to 64, got 1e1/],
      [['overhead', '--stages', '2,4,2'], /--stages must list each depth once, got 2,4,2/],
      [['sim', '--bogus'], /unknown flag --bogus \(see `npm run bench -- sim --help`\)/],
      [['async', '--data', '/nonexistent/corpus.txt'], /--data \/nonexistent\/corpus\.txt: no such file/],
      [['frobnicate'], /unknown benchmark "frobnicate"/],
      // Names an object has from its prototype are no benchmarks either.
      [['toString'], /unknown benchmark "toString"/],
      [['constructor'], /unknown benchmark "constructor"/],
      [['__proto__'], /unknown benchmark "__proto__"/],
    ] as const) {
      const r = bench(...argv);
      assert.equal(r.status, 2, `${argv.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, re, argv.join(' '));
      assert.ok(!/\n\s+at /.test(r.stderr), `no stack trace: ${r.stderr}`);
    }
  });

  it('stops the benchmark it started when it is stopped itself, and exits as killed by that signal', async function () {
    this.timeout(20_000);
    const parent = spawn(process.execPath, [
      path.join(__dirname, '..', 'bench', 'run.js'),
      'reference',
      '--seeds',
      '3',
    ]);
    const exited = new Promise<number | null>((resolve) => parent.on('exit', (code) => resolve(code)));
    const childrenOf = (pid: number) =>
      readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    let child: number | undefined;
    for (let i = 0; i < 200 && child === undefined; i++) {
      await new Promise((r) => setTimeout(r, 25));
      child = childrenOf(parent.pid!)[0];
    }
    assert.ok(child, 'the benchmark process never started');
    parent.kill('SIGTERM');
    assert.equal(await exited, 128 + 15);
    const alive = () => {
      try {
        // A zombie is gone as far as work goes: only its exit status waits to be read.
        return !/^State:\s+Z/m.test(readFileSync(`/proc/${child}/status`, 'utf8'));
      } catch {
        return false;
      }
    };
    for (let i = 0; i < 100 && alive(); i++) await new Promise((r) => setTimeout(r, 50));
    assert.ok(!alive(), `benchmark process ${child} still runs after its launcher was stopped`);
  });
});
