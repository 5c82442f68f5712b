import { strict as assert } from 'assert';
import { spawn } from 'child_process';
import * as path from 'path';

type Ending = { out: string; code: number | null; signal: string | null };

/** Runs `body` in a fresh Node process with onProcessEnd in scope; its stdout and how it ended. */
function inChild(body: string): Promise<Ending> {
  const script = `const { onProcessEnd } = require(${JSON.stringify(path.join(__dirname, '..', 'transport', 'process-cleanup.js'))});\n${body}`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ out, code, signal })));
}

/** inChild with a cleanup that prints `cleanup;`, registered first, and a timer that keeps the process up for 5 s. */
function withCleanup(body: string): Promise<Ending> {
  return inChild(`onProcessEnd(() => process.stdout.write('cleanup;'));\n${body}\nsetTimeout(() => {}, 5000);`);
}

describe('process cleanup', function () {
  this.timeout(20_000);

  it('runs on a signal nobody else handles, then the signal ends the process', async () => {
    const r = await withCleanup(`
      setTimeout(() => process.kill(process.pid, 'SIGTERM'), 50);
      setTimeout(() => process.stdout.write('still alive;'), 2000);`);
    assert.equal(r.out, 'cleanup;');
    assert.equal(r.signal, 'SIGTERM');
  });

  it('waits while another handler ends the work in order, then runs before the re-raised signal ends the process', async () => {
    const r = await withCleanup(`
      process.once('SIGINT', () => {
        process.stdout.write('orderly start;');
        setTimeout(() => { process.stdout.write('orderly end;'); process.kill(process.pid, 'SIGINT'); }, 200);
      });
      setTimeout(() => process.kill(process.pid, 'SIGINT'), 50);`);
    assert.equal(r.out, 'orderly start;orderly end;cleanup;');
    assert.equal(r.signal, 'SIGINT');
  });

  it('runs at once on a second signal during the orderly end', async () => {
    const r = await withCleanup(`
      process.once('SIGTERM', () => process.stdout.write('orderly start;'));
      setTimeout(() => process.kill(process.pid, 'SIGTERM'), 50);
      setTimeout(() => process.kill(process.pid, 'SIGTERM'), 150);`);
    assert.equal(r.out, 'orderly start;cleanup;');
    assert.equal(r.signal, 'SIGTERM');
  });

  it('runs on a normal exit, and not at all once forgotten', async () => {
    const r = await inChild(`
      onProcessEnd(() => process.stdout.write('a;'));
      const forget = onProcessEnd(() => process.stdout.write('b;'));
      forget();`);
    assert.equal(r.out, 'a;');
    assert.equal(r.code, 0);
  });
});
