import { strict as assert } from 'assert';
import { execFileSync, spawn, spawnSync } from 'child_process';
import * as path from 'path';
import { encodeValue } from '../transport/codec';
import { newInspectState, render, takeMessage } from '../cli/inspect-view';
import { isAlive, natsServerForSuite, until } from './nats-server-fixture';

const CLI = path.join(__dirname, '..', 'cli', 'main.js');

const stats = (stage: number, upMs: number, tasks: number, extra: Record<string, unknown> = {}) => ({
  v: 1,
  job: 'j',
  stage,
  upMs,
  iteration: 2,
  running: 'F3',
  ready: { F: ['F4', 'F5'], B: [], W: [] },
  inflight: 3,
  limit: 32,
  policy: 'bf',
  swapsPending: 0,
  tasks,
  sent: tasks,
  sentBytes: 100 * tasks,
  received: tasks,
  receivedBytes: 100 * tasks,
  blockedMs: upMs / 4,
  rejected: 0,
  ...extra,
});

describe('baton inspect: the view', () => {
  it('shows a row per stage with rates from two stats messages, and counts what is malformed', () => {
    const s = newInspectState('j');
    takeMessage(s, 'baton.j.stats.1', encodeValue(stats(1, 1000, 10)), 0);
    takeMessage(s, 'baton.j.stats.1', encodeValue(stats(1, 2000, 30)), 1000);
    takeMessage(s, 'baton.j.stats.0', encodeValue(stats(0, 2000, 5)), 1000);
    takeMessage(s, 'baton.j.stats.2', encodeValue(stats(2, 1, 1, { ready: 'nope' })), 1000);
    takeMessage(s, 'baton.j.stats.3', new Uint8Array([0xff]), 1000);
    const lines = render(s, 1000);
    assert.match(lines[0], /job j {2}iteration 2 {2}elapsed 2\.0 s {2}stages 2 {2}ignored 2 malformed/);
    const row1 = lines.find((l) => l.startsWith('1 '))!;
    // 20 tasks, 40 messages and 4000 bytes in one second; blocked a quarter of it.
    assert.match(row1, /^1 +bf +2 +F3 +F4 F5 \| - \| - +3\/32 +20\.0 +40\.0 +4\.0k +25% +live$/);
    assert.ok(lines.some((l) => l.startsWith('0 ')));
  });
});

const hasTmux = spawnSync('tmux', ['-V']).status === 0;

describe('baton inspect in a real terminal (tmux)', function () {
  this.timeout(300_000);
  const server = natsServerForSuite();
  before(function () {
    if (!hasTmux) {
      console.log('      tmux is missing: skipping the terminal test of baton inspect (scripts/test.sh installs it)');
      this.skip();
    }
  });

  it('shows every stage and updates while the job runs; Ctrl-C exits 0 and the job goes on', async () => {
    const url = server().url;
    const job = 'inspected';
    const socket = `baton-test-${process.pid}`;
    const tmux = (...args: string[]) => execFileSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' });
    const run = spawn(
      process.execPath,
      [
        CLI,
        'run',
        ...['--transport', 'nats', '--processes', 'single', '--nats', url, '--job', job],
        ...['--stages', '4', '--microbatches', '8', '--profile', 'llm', '--iterations', '60'],
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let runErr = '';
    run.stderr.on('data', (d) => (runErr += d));
    const exited = new Promise<number>((r) => run.on('close', (code) => r(code ?? -1)));
    try {
      tmux(
        'new-session',
        '-d',
        '-s',
        'inspect',
        '-x',
        '160',
        '-y',
        '30',
        `${process.execPath} ${CLI} inspect --job ${job} --nats ${url}; echo "inspect exited $?"; sleep 60`,
      );
      const screen = () => tmux('capture-pane', '-p', '-t', 'inspect');
      const rows = (text: string) => [0, 1, 2, 3].every((st) => new RegExp(`^${st} +bf +\\d+ `, 'm').test(text));
      let first = '';
      await until(() => rows((first = screen())), 'a row for every stage on the screen', 30_000);
      // It redraws: the elapsed time moves on.
      const elapsed = (text: string) => /elapsed ([0-9.]+) s/.exec(text)?.[1];
      let later = first;
      await until(() => elapsed((later = screen())) !== elapsed(first), 'the screen to update', 10_000);
      assert.ok(rows(later), later);
      tmux('send-keys', '-t', 'inspect', 'C-c');
      let after = '';
      await until(() => /inspect exited \d+/.test((after = screen())), 'inspect to exit', 10_000);
      assert.match(after, /inspect exited 0/);
      assert.ok(isAlive(run.pid!), 'the job stopped with the view');
      assert.equal(await exited, 0, runErr);
    } finally {
      spawnSync('tmux', ['-L', socket, 'kill-server']);
      if (run.exitCode === null) run.kill();
    }
  });
});
