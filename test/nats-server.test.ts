import { strict as assert } from 'assert';
import { execFileSync, spawn } from 'child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { NatsServerHandle, startNatsServer } from '../transport/nats-server';
import { findNatsServer } from '../transport/nats-server-binary';
import { NatsServerError } from '../transport/nats-server-error';
import { isAlive, until } from './nats-server-fixture';

describe('startNatsServer', function () {
  this.timeout(20_000);

  it('says to install the Debian package when the binary is missing', async () => {
    await assert.rejects(
      startNatsServer({ binary: '/nonexistent/nats-server' }),
      (e: unknown) =>
        e instanceof NatsServerError && e.reason === 'missing-binary' && /apt-get install nats-server/.test(e.message),
    );
  });

  it('refuses a directory named nats-server, and fails within its start timeout when the binary cannot be run', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'baton-test-'));
    try {
      mkdirSync(join(dir, 'nats-server'));
      await assert.rejects(
        startNatsServer({ binary: join(dir, 'nats-server') }),
        (e: unknown) => e instanceof NatsServerError && e.reason === 'missing-binary',
      );
      const script = join(dir, 'broken');
      writeFileSync(script, '#!/nonexistent/interpreter\n', { mode: 0o755 });
      const t0 = Date.now();
      await assert.rejects(
        startNatsServer({ binary: script, startTimeoutMs: 1500 }),
        (e: unknown) => e instanceof NatsServerError && e.reason === 'exited',
      );
      assert.ok(Date.now() - t0 < 5000, `gave up after ${Date.now() - t0} ms`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('fails with the server output when the server cannot start', async () => {
    const first = await startNatsServer();
    try {
      await assert.rejects(
        startNatsServer({ port: first.port }),
        (e: unknown) =>
          e instanceof NatsServerError && e.reason === 'exited' && /address already in use/i.test(e.message),
      );
    } finally {
      await first.stop();
    }
  });

  it('leaves no temp files once the server is up, still shows its log, and kills the server on stop', async () => {
    const own = mkdtempSync(join(tmpdir(), 'baton-test-'));
    const saved = process.env.TMPDIR;
    let s: NatsServerHandle | undefined;
    try {
      process.env.TMPDIR = own;
      try {
        s = await startNatsServer();
      } finally {
        if (saved === undefined) delete process.env.TMPDIR;
        else process.env.TMPDIR = saved;
      }
      const log = s.log();
      assert.match(log, /Server is ready/);
      assert.deepEqual(readdirSync(own), [], 'no temp files while the server runs');
      await s.stop();
      assert.equal(isAlive(s.pid), false);
      assert.match(s.log(), /Server is ready/, 'the log is still there after stop');
    } finally {
      await s?.stop();
      rmSync(own, { recursive: true, force: true });
    }
  });

  it('kills servers left running, and leaves no temp files, when the parent process exits', async () => {
    const own = mkdtempSync(join(tmpdir(), 'baton-test-'));
    try {
      const script = `require(${JSON.stringify(join(__dirname, '../transport/nats-server.js'))}).startNatsServer().then((s) => {
        console.log(JSON.stringify({ pid: s.pid }));
        process.exit(0);
      });`;
      const { pid } = JSON.parse(
        execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, TMPDIR: own } }),
      ) as { pid: number };
      assert.ok(pid > 0);
      await until(() => !isAlive(pid), `nats-server ${pid} to die with its parent`, 3000);
      assert.deepEqual(readdirSync(own), []);
    } finally {
      rmSync(own, { recursive: true, force: true });
    }
  });

  it('still removes the temp dir when the server cannot start', async () => {
    const before = new Set(readdirSync(tmpdir()).filter((f) => f.startsWith('baton-nats-')));
    const first = await startNatsServer();
    try {
      await assert.rejects(startNatsServer({ port: first.port }));
    } finally {
      await first.stop();
    }
    assert.deepEqual(
      readdirSync(tmpdir()).filter((f) => f.startsWith('baton-nats-') && !before.has(f)),
      [],
    );
  });

  it('leaves no temp files when its parent is killed with SIGKILL while the server starts', async function () {
    if (!existsSync('/usr/bin/setpriv') && !existsSync('/bin/setpriv')) this.skip();
    const tmp = mkdtempSync(join(tmpdir(), 'baton-test-'));
    try {
      // A server that takes 1.5 s to start: the parent dies meanwhile.
      const slow = join(tmp, 'slow-nats-server');
      writeFileSync(slow, `#!/bin/sh\nsleep 1.5\nexec ${findNatsServer()} "$@"\n`, { mode: 0o755 });
      const own = join(tmp, 'tmp');
      mkdirSync(own);
      const script = `require(${JSON.stringify(join(__dirname, '../transport/nats-server.js'))}).startNatsServer({ binary: ${JSON.stringify(slow)} });
        setTimeout(() => console.log('starting'), 500);`;
      const parent = spawn(process.execPath, ['-e', script], {
        stdio: ['ignore', 'pipe', 'inherit'],
        env: { ...process.env, TMPDIR: own },
      });
      await new Promise<void>((resolve) => parent.stdout!.once('data', () => resolve()));
      parent.kill('SIGKILL');
      await new Promise((r) => setTimeout(r, 2500));
      assert.deepEqual(readdirSync(own), [], 'the temp dir is gone');
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('does not outlive a parent killed with SIGKILL (no cleanup runs), where setpriv is installed', async function () {
    if (!existsSync('/usr/bin/setpriv') && !existsSync('/bin/setpriv')) this.skip();
    const script = `require(${JSON.stringify(join(__dirname, '../transport/nats-server.js'))}).startNatsServer().then((s) => {
      console.log(JSON.stringify({ pid: s.pid }));
      setInterval(() => {}, 60000);
    });`;
    const own = mkdtempSync(join(tmpdir(), 'baton-test-'));
    const parent = spawn(process.execPath, ['-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, TMPDIR: own },
    });
    const line = await new Promise<string>((resolve) =>
      parent.stdout!.once('data', (d: Buffer) => resolve(d.toString())),
    );
    const { pid } = JSON.parse(line) as { pid: number };
    assert.ok(isAlive(pid));
    parent.kill('SIGKILL');
    try {
      await until(() => !isAlive(pid), `nats-server ${pid} to die with its SIGKILLed parent`, 3000);
      assert.deepEqual(readdirSync(own), [], 'and no temp files are left');
    } finally {
      if (isAlive(pid)) process.kill(pid, 'SIGKILL');
      rmSync(own, { recursive: true, force: true });
    }
  });
});
