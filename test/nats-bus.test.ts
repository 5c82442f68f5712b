import { strict as assert } from 'assert';
import { execFileSync, spawn } from 'child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { decodeEnvelope, encodeEnvelope } from '../transport/codec';
import type { Envelope } from '../transport/envelope';
import { NatsBus, NatsBusError, PayloadTooLargeError } from '../transport/nats-bus';
import {
  NatsServerError,
  findNatsServer,
  freePort,
  freePorts,
  serverPorts,
  startNatsServer,
} from '../transport/nats-server';
import type * as net from 'net';
// The module object itself (an `import *` is a copy with getters), so a test can replace createServer.

const netModule: { createServer: typeof net.createServer } = require('net');
import { InvalidSubjectError } from '../transport/local-bus';
import type { NatsServerHandle } from '../transport/nats-server';
import { jobWildcard, subject } from '../transport/subjects';

function envelope(seq: number, values: number[]): Envelope {
  return {
    v: 1,
    job: 'nt',
    kind: 'activation',
    iteration: 0,
    mb: seq,
    chunk: 0,
    dir: 'forward',
    src: 0,
    dst: 1,
    seq,
    sentAt: Date.now(),
    bytes: 0,
    tensors: [{ dtype: 'float32', shape: [values.length], data: Float32Array.from(values) }],
  };
}

/** Resolve once `pred()` holds, polling; reject after `ms` with `what`. */
async function until(pred: () => boolean, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** True while `pid` runs; a zombie (killed, not yet reaped by its new parent) counts as dead. */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

describe('NatsBus over a real nats-server', function () {
  this.timeout(20_000);
  let server: NatsServerHandle;
  const buses: NatsBus[] = [];
  const bus = async () => {
    const b = await NatsBus.connect(server.url);
    buses.push(b);
    return b;
  };

  before(async () => {
    server = await startNatsServer();
  });
  after(async () => {
    await Promise.all(buses.map((b) => b.close()));
    await server?.stop();
  });

  it('reports the raised max_payload of a generated server', async () => {
    assert.equal((await bus()).maxPayload, 64 * 1024 * 1024);
  });

  it('carries encoded envelopes from one connection to another, decoded intact', async () => {
    const [pub, sub] = [await bus(), await bus()];
    const got: Envelope[] = [];
    sub.subscribe(subject('nt', 'activation', 1), (_s, d) => got.push(decodeEnvelope(d)));
    await sub.flush();
    for (let i = 0; i < 5; i++)
      pub.publish(subject('nt', 'activation', 1), encodeEnvelope(envelope(i, [i, i + 0.5, -i])));
    await pub.flush();
    await until(() => got.length === 5, '5 envelopes');
    assert.deepEqual(
      got.map((e) => [e.seq, Array.from(e.tensors[0].data)]),
      [0, 1, 2, 3, 4].map((i) => [i, [i, i + 0.5, -i]]),
    );
  });

  it('lets a baton.<job>.> subscription see every subject of the job and none of another', async () => {
    const [pub, tap] = [await bus(), await bus()];
    const seen: string[] = [];
    tap.subscribe(jobWildcard('wj'), (s) => seen.push(s));
    await tap.flush();
    const subjects = [
      subject('wj', 'activation', 0),
      subject('wj', 'gradient', 3),
      subject('wj', 'control'),
      subject('wj', 'tp', 1, 2),
    ];
    for (const s of [...subjects, subject('other', 'activation', 0)]) pub.publish(s, new Uint8Array([1]));
    pub.publish(subject('wj', 'report'), new Uint8Array([2]));
    await pub.flush();
    await until(() => seen.includes('baton.wj.report'), 'the last message');
    assert.deepEqual(seen, [...subjects, 'baton.wj.report']);
  });

  it('keeps the connection alive when a handler throws, and counts the error', async () => {
    const errors: string[] = [];
    const b = await NatsBus.connect(server.url, { onError: (e) => errors.push((e as Error).message) });
    buses.push(b);
    const got: number[] = [];
    b.subscribe('baton.throw.x', (_s, d) => {
      if (d[0] === 0) throw new Error('handler failed');
      got.push(d[0]);
    });
    await b.flush();
    for (let i = 0; i < 4; i++) b.publish('baton.throw.x', new Uint8Array([i]));
    await b.flush();
    await until(() => got.length === 3, 'the messages after the throwing one');
    assert.deepEqual(got, [1, 2, 3]);
    assert.equal(b.errors, 1);
    assert.deepEqual(errors, ['handler failed']);
    assert.equal(b.connection.isClosed(), false);
  });

  it('flush() makes the server round trip after a subscribe or unsubscribe, not only after publishes, and skips it when nothing was sent', async () => {
    const b = await bus();
    let roundTrips = 0;
    const flush = b.connection.flush.bind(b.connection);
    b.connection.flush = () => {
      roundTrips++;
      return flush();
    };
    const sub = b.subscribe('baton.flush.x', () => {});
    await b.flush();
    assert.equal(roundTrips, 1, 'a subscription must be registered at the server when flush() resolves');
    await b.flush();
    assert.equal(roundTrips, 1, 'nothing sent since: no round trip');
    b.publish('baton.flush.x', new Uint8Array([1]));
    await b.flush();
    assert.equal(roundTrips, 2);
    sub.unsubscribe();
    await b.flush();
    assert.equal(roundTrips, 3);
  });

  it('counts messages and bytes in and out', async () => {
    const b = await bus();
    let n = 0;
    b.subscribe('baton.count.x', () => n++);
    await b.flush();
    b.publish('baton.count.x', new Uint8Array(100));
    b.publish('baton.count.x', new Uint8Array(28));
    await b.flush();
    await until(() => n === 2, 'two messages');
    assert.deepEqual([b.msgsOut, b.bytesOut, b.msgsIn, b.bytesIn], [2, 128, 2, 128]);
  });

  it('written(): once it resolves, the server gets the bytes even while this thread is blocked', async () => {
    const mon = await startNatsServer({ monitor: true });
    const b = await NatsBus.connect(mon.url);
    try {
      const inBytes = () =>
        JSON.parse(
          execFileSync(
            process.execPath,
            [
              '-e',
              `fetch(${JSON.stringify(`${mon.monitorUrl}/varz`)}).then((r) => r.json()).then((v) => console.log(JSON.stringify(v.in_bytes)))`,
            ],
            { encoding: 'utf8' },
          ),
        ) as number;
      const before = inBytes();
      const size = 8 * 1024 * 1024;
      b.publish('baton.nt.activation.9', new Uint8Array(size));
      await b.written();
      // From here the thread never returns to the event loop (as during a compute task):
      // only the kernel and the server can move the bytes.
      const deadline = Date.now() + 10_000;
      let got = inBytes() - before;
      while (got < size && Date.now() < deadline) got = inBytes() - before;
      assert.ok(got >= size, `the server received ${got} of ${size} bytes while the publisher was blocked`);
      await b.written(); // nothing pending: resolves at once
    } finally {
      await b.close();
      await mon.stop();
    }
  });

  it('refuses a subject longer than MAX_SUBJECT_BYTES before the server sees it: a protocol line over 4 KB cost the connection, and what followed it', async () => {
    const [pub, sub] = [await bus(), await bus()];
    let got = 0;
    sub.subscribe('baton.long.ok', () => {
      got++;
    });
    await sub.flush();
    const long = `baton._nodes.${'n'.repeat(5000)}`;
    assert.throws(
      () => pub.publish(long, new Uint8Array(1)),
      (e: unknown) =>
        e instanceof InvalidSubjectError && /longer than 1024 bytes/.test(e.message) && e.message.length < 300,
    );
    assert.throws(() => pub.subscribe(long, () => undefined), InvalidSubjectError);
    pub.publish('baton.long.ok', new Uint8Array(1));
    await pub.flush();
    await until(() => got === 1, 'the message after the refused one');
    assert.equal(pub.disconnects, 0);
  });

  it('counts a publish on a closed connection instead of throwing', async () => {
    const errors: unknown[] = [];
    const b = await NatsBus.connect(server.url, { onError: (e) => errors.push(e) });
    await b.close();
    assert.doesNotThrow(() => b.publish('baton.closed.x', new Uint8Array(3)));
    assert.equal(b.publishErrors, 1);
    assert.equal(errors.length, 1);
    assert.match((errors[0] as Error).message, /"baton\.closed\.x".*3 bytes/);
  });

  it('close() delivers what was published before it, even messages still queued in the socket', async () => {
    const sub = await bus();
    let got = 0;
    sub.subscribe('baton.closing.x', () => {
      got++;
    });
    await sub.flush();
    const pub = await NatsBus.connect(server.url);
    for (let i = 0; i < 20; i++) pub.publish('baton.closing.x', new Uint8Array(4 * 1024 * 1024));
    await pub.close();
    await until(() => got === 20, `20 messages published before close (got ${got})`, 10_000);
  });

  it('close() does not wait long for a server that stopped answering', async () => {
    const own = await startNatsServer();
    const b = await NatsBus.connect(own.url);
    try {
      process.kill(own.pid, 'SIGSTOP');
      b.publish('baton.closing.y', new Uint8Array(16 * 1024 * 1024));
      const t0 = Date.now();
      await b.close();
      assert.ok(Date.now() - t0 < 8000, `close took ${Date.now() - t0} ms`);
    } finally {
      process.kill(own.pid, 'SIGCONT');
      await own.stop();
    }
  });

  it('close() returns at once when the connection is down', async () => {
    const own = await startNatsServer();
    const b = await NatsBus.connect(own.url);
    await own.stop();
    await b.disconnected();
    await new Promise((r) => setTimeout(r, 50));
    b.publish('baton.closing.z', new Uint8Array(10));
    const t0 = Date.now();
    await b.close();
    assert.ok(Date.now() - t0 < 1000, `close took ${Date.now() - t0} ms`);
  });

  it("keeps a subscriber whose thread a long compute task holds (over the server's default 10 s write deadline), and delivers to it afterwards", async function () {
    this.timeout(60_000);
    const [pub, sub] = [await bus(), await bus()];
    let got = 0;
    sub.subscribe('baton.busy.x', (_s, d) => {
      got += d.byteLength;
    });
    await sub.flush();
    pub.publish('baton.busy.x', new Uint8Array(8 * 1024 * 1024));
    await pub.flush();
    // The server now writes to a connection that does not read, as a stage process's in a task.
    const until12s = Date.now() + 12_000;
    while (Date.now() < until12s) {
      /* busy */
    }
    await until(() => got > 0 || sub.disconnects > 0, 'the message or a disconnect');
    assert.equal(sub.disconnects, 0, 'cut off as a slow consumer');
    assert.equal(got, 8 * 1024 * 1024);
  });

  it('closed() resolves when the server goes away for good, so a watcher can report it', async () => {
    const own = await startNatsServer();
    const bus = await NatsBus.connect(own.url, { reconnect: false });
    let settled = false;
    const closed = bus.closed().then((err) => {
      settled = true;
      return err;
    });
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(settled, false, 'open while the server runs');
    await own.stop();
    await closed;
    assert.equal(settled, true);
  });

  it('fails to connect to a port with no server with a typed error naming the url', async () => {
    const url = `nats://127.0.0.1:${await freePort()}`;
    await assert.rejects(
      NatsBus.connect(url, { timeoutMs: 1000 }),
      (e: unknown) => e instanceof NatsBusError && e.message.includes(url),
    );
  });

  it('refuses a message over the server max_payload with a typed error naming size and limit', async () => {
    const small = await startNatsServer({ maxPayload: 256 * 1024 });
    const b = await NatsBus.connect(small.url);
    try {
      assert.equal(b.maxPayload, 256 * 1024);
      let got = 0;
      b.subscribe('baton.big.x', (_s, d) => {
        got = d.byteLength;
      });
      await b.flush();
      assert.throws(
        () => b.publish('baton.big.x', new Uint8Array(256 * 1024 + 1)),
        (e: unknown) =>
          e instanceof PayloadTooLargeError &&
          e.size === 262145 &&
          e.limit === 262144 &&
          /262145 bytes.*262144/.test(e.message),
      );
      b.publish('baton.big.x', new Uint8Array(256 * 1024));
      await b.flush();
      await until(() => got > 0, 'the message at the limit');
      assert.equal(got, 256 * 1024);
      assert.equal(b.connection.isClosed(), false);
    } finally {
      await b.close();
      await small.stop();
    }
  });

  it('delivers across a 3-server cluster joined by routes: published on A, received on C', async () => {
    const a = await startNatsServer({ cluster: true, monitor: true, name: 'A' });
    const b = await startNatsServer({ routes: [a.clusterUrl!], monitor: true, name: 'B' });
    const c = await startNatsServer({ routes: [a.clusterUrl!], monitor: true, name: 'C' });
    const [onA, onC] = [await NatsBus.connect(a.url), await NatsBus.connect(c.url)];
    try {
      await Promise.all([a.waitForRoutes(2), b.waitForRoutes(2), c.waitForRoutes(2)]);
      const got: Envelope[] = [];
      onC.subscribe('baton.cl.>', (_s, d) => got.push(decodeEnvelope(d)));
      await onC.flush();
      // Interest travels from C to A over the route asynchronously: publish until it lands.
      for (let i = 0; got.length === 0; i++) {
        assert.ok(i < 200, 'nothing published on A reached C within 10 s');
        onA.publish(subject('cl', 'gradient', 2), encodeEnvelope(envelope(i, [7, 8])));
        await onA.flush();
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.deepEqual(Array.from(got[0].tensors[0].data), [7, 8]);
      assert.equal(got[0].job, 'nt');
    } finally {
      await Promise.all([onA.close(), onC.close()]);
      await Promise.all([a.stop(), b.stop(), c.stop()]);
    }
  });
});

describe('startNatsServer', function () {
  this.timeout(20_000);

  it('picks different free ports for the client, cluster and monitoring listeners (ports freed one after the other could be the same)', async function () {
    this.timeout(120_000);
    for (let i = 0; i < 10_000; i++) {
      const { port, clusterPort, monitorPort } = await serverPorts({ cluster: true, monitor: true });
      assert.equal(
        new Set([port, clusterPort, monitorPort]).size,
        3,
        `ports ${port}, ${clusterPort}, ${monitorPort} (try ${i})`,
      );
    }
  });

  it('leaves no probe socket listening when one of them cannot listen', async () => {
    const made: net.Server[] = [];
    const real = netModule.createServer;
    netModule.createServer = ((...args: Parameters<typeof net.createServer>) => {
      const srv = real(...args);
      made.push(srv);
      // The first fails at once; the others bind a little later (as after a name lookup).
      const listen = srv.listen.bind(srv) as (...a: unknown[]) => net.Server;
      srv.listen = (
        made.length === 1
          ? () => {
              process.nextTick(() => srv.emit('error', new Error('EMFILE (simulated)')));
              return srv;
            }
          : (...a: unknown[]) => {
              setTimeout(() => listen(...a), 10);
              return srv;
            }
      ) as typeof srv.listen;
      return srv;
    }) as typeof net.createServer;
    try {
      await assert.rejects(freePorts(3), /EMFILE \(simulated\)/);
    } finally {
      netModule.createServer = real;
    }
    await new Promise((r) => setTimeout(r, 50));
    const listening = made.map((m) => m.listening);
    for (const m of made) if (m.listening) m.close(); // so a failure here does not keep mocha alive
    assert.equal(made.length, 3);
    assert.deepEqual(listening, [false, false, false]);
  });

  it('says to install the Debian package when the binary is missing', async () => {
    await assert.rejects(
      startNatsServer({ binary: '/nonexistent/nats-server' }),
      (e: unknown) =>
        e instanceof NatsServerError && e.code === 'missing-binary' && /apt-get install nats-server/.test(e.message),
    );
  });

  it('refuses a directory named nats-server, and fails within its start timeout when the binary cannot be run', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'baton-test-'));
    try {
      mkdirSync(join(dir, 'nats-server'));
      await assert.rejects(
        startNatsServer({ binary: join(dir, 'nats-server') }),
        (e: unknown) => e instanceof NatsServerError && e.code === 'missing-binary',
      );
      const script = join(dir, 'broken');
      writeFileSync(script, '#!/nonexistent/interpreter\n', { mode: 0o755 });
      const t0 = Date.now();
      await assert.rejects(
        startNatsServer({ binary: script, startTimeoutMs: 1500 }),
        (e: unknown) => e instanceof NatsServerError && e.code === 'exited',
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
          e instanceof NatsServerError && e.code === 'exited' && /address already in use/i.test(e.message),
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
