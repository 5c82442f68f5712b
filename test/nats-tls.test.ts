import { strict as assert } from 'assert';
import { execFileSync, spawn } from 'child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import * as path from 'path';
import { NatsServerHandle, startNatsServer } from '../transport/nats-server';
import { NatsBus } from '../transport/nats-bus';

const CLI = path.join(__dirname, '..', 'cli', 'main.js');
/** The job both runs here are given: 2 stages, 2 microbatches, 1 iteration. */
const TINY_RUN = ['--stages', '2', '--microbatches', '2', '--iterations', '1'];

/** A CA, a server certificate for 127.0.0.1 and a client certificate, made by openssl in `dir`. */
function makeCerts(dir: string): Record<'ca' | 'serverCert' | 'serverKey' | 'clientCert' | 'clientKey', string> {
  const f = (n: string) => path.join(dir, n);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  ssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '1',
    '-subj',
    '/CN=baton test CA',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
  );
  const leaf = (name: string, ext: string) => {
    writeFileSync(f(`${name}.ext`), ext);
    ssl(
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      `/CN=${name}`,
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.csr`,
    );
    ssl(
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      '1',
      '-extfile',
      `${name}.ext`,
      '-out',
      `${name}.pem`,
    );
    chmodSync(f(`${name}.key`), 0o600);
  };
  leaf('server', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  leaf('client', 'extendedKeyUsage=clientAuth\n');
  return {
    ca: f('ca.pem'),
    serverCert: f('server.pem'),
    serverKey: f('server.key'),
    clientCert: f('client.pem'),
    clientKey: f('client.key'),
  };
}

/** `baton …` as a child process (the stage processes it starts are real too): status, stdout, stderr. */
function baton(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  timeoutMs = 90_000,
): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.stderr.on('data', (d: Buffer) => (err += d));
    const t = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(t);
      resolve({ code, out, err });
    });
  });
}

describe('NATS over TLS with a CA made by openssl in the test', function () {
  this.timeout(120_000);
  let dir: string;
  let certs: ReturnType<typeof makeCerts>;
  let server: NatsServerHandle;
  let tls: string[];
  let credsFile: string;

  before(async function () {
    dir = mkdtempSync(path.join(tmpdir(), 'baton-tls-'));
    certs = makeCerts(dir);
    // The server verifies client certificates and requires a login as well.
    server = await startNatsServer({
      tls: { cert: certs.serverCert, key: certs.serverKey, ca: certs.ca },
      auth: { user: 'tls-user', password: 'p:ss w0rd' },
    });
    credsFile = path.join(dir, 'user.creds');
    writeFileSync(credsFile, 'tls-user:p:ss w0rd\n', { mode: 0o600 });
    tls = ['--tls-ca', certs.ca, '--tls-cert', certs.clientCert, '--tls-key', certs.clientKey];
  });

  after(async () => {
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('serves tls:// URLs to a NatsBus with the CA, client certificate and credentials file', async () => {
    assert.match(server.url, /^tls:\/\/127\.0\.0\.1:\d+$/);
    const bus = await NatsBus.connect(server.url, {
      access: { tlsCa: certs.ca, tlsCert: certs.clientCert, tlsKey: certs.clientKey, creds: credsFile },
    });
    try {
      let got = '';
      bus.subscribe('baton.tls.x', (_s, d) => (got = Buffer.from(d).toString()));
      await bus.flush();
      bus.publish('baton.tls.x', Buffer.from('over tls'));
      await bus.flush();
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(got, 'over tls');
      assert.equal(bus.url, server.url);
    } finally {
      await bus.close();
    }
  });

  it('runs a job over tls:// with stage processes that get the settings from the environment, and tap watches it', async () => {
    const job = 'tlsjob';
    // The tap (the nats CLI's variable names) and the run (Baton's, the credentials from a file) both connect over TLS.
    const tapEnv = {
      NATS_URL: server.url,
      NATS_CA: certs.ca,
      NATS_CERT: certs.clientCert,
      NATS_KEY: certs.clientKey,
      NATS_CREDS: credsFile,
    };
    const tap = baton(['tap', '--job', job, '--count', '3', '--timeout', '60', '--json'], tapEnv);
    // Give the tap its subscription before the job starts (it prints "watching" once the server confirmed it).
    await new Promise((r) => setTimeout(r, 1500));
    const run = await baton(
      [
        'run',
        '--transport',
        'nats',
        '--nats',
        server.url,
        ...tls,
        '--job',
        job,
        ...TINY_RUN,
        '--profile',
        'uniform',
        '--json',
      ],
      { BATON_NATS_CREDS: credsFile },
    );
    assert.equal(run.code, 0, run.err);
    const result = JSON.parse(run.out) as { processes: number; validation?: { ok: boolean } };
    assert.equal(result.processes, 2, 'a stage process per stage');
    const tapped = await tap;
    assert.equal(tapped.code, 0, tapped.err);
    assert.match(tapped.err, new RegExp(`watching baton\\.${job}\\.> on tls://127\\.0\\.0\\.1:${server.port}`));
    const lines = tapped.out.trim().split('\n');
    assert.equal(lines.length, 3, tapped.out);
    for (const l of lines)
      assert.match((JSON.parse(l) as { subject: string }).subject, new RegExp(`^baton\\.${job}\\.`));
  });

  it('refuses a plain nats:// URL to the TLS server clearly, with exit status 2 and no stack trace', async () => {
    const t0 = Date.now();
    const r = await baton(['tap', '--nats', `nats://127.0.0.1:${server.port}`, '--job', 'x', '--timeout', '5']);
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, /requires TLS, and a nats:\/\/ URL is plain text: give it as tls:\/\/127\.0\.0\.1:\d+/);
    assert.doesNotMatch(r.err, /\n\s+at /, 'no stack trace');
    assert.ok(Date.now() - t0 < 15_000, 'refused at once, not after a hang');
    const run = await baton(['run', '--transport', 'nats', '--nats', `127.0.0.1:${server.port}`, ...TINY_RUN]);
    assert.equal(run.code, 2, run.err);
    assert.match(run.err, /NatsTlsError: the NATS server at nats:\/\/127\.0\.0\.1:\d+ requires TLS/);
  });

  it('says what is wrong with TLS files and credentials before connecting', async () => {
    const plain = await baton(['tap', '--nats', 'nats://127.0.0.1:1', '--tls-ca', certs.ca, '--job', 'x']);
    assert.equal(plain.code, 2);
    assert.match(plain.err, /--tls-ca is for a TLS server: give the server as tls:\/\/host:port/);
    const half = await baton(['tap', '--nats', server.url, '--tls-cert', certs.clientCert, '--job', 'x']);
    assert.equal(half.code, 2);
    assert.match(half.err, /--tls-cert and --tls-key go together/);
    const open = path.join(dir, 'open.creds');
    writeFileSync(open, 'u:p\n', { mode: 0o644 });
    chmodSync(open, 0o644);
    const leaky = await baton(['tap', '--nats', server.url, ...tls, '--job', 'x'], { BATON_NATS_CREDS: open });
    assert.equal(leaky.code, 2);
    assert.match(leaky.err, /BATON_NATS_CREDS ".*open\.creds" is readable by others \(mode 644\); chmod 600 it/);
    const missing = await baton(['tap', '--nats', server.url, '--tls-ca', path.join(dir, 'nope.pem'), '--job', 'x']);
    assert.equal(missing.code, 2);
    assert.match(missing.err, /--tls-ca ".*nope\.pem": cannot read it/);
  });

  it('fails a tls:// connection without the CA with a hint, and one without a client certificate', async () => {
    const noCa = await baton(['tap', '--nats', server.url, '--job', 'x', '--timeout', '5'], {
      BATON_NATS_CREDS: credsFile,
    });
    assert.equal(noCa.code, 1, noCa.err);
    assert.match(noCa.err, /cannot connect to NATS at tls:\/\/127\.0\.0\.1:\d+: .*certificate.*--tls-ca/);
    await assert.rejects(
      NatsBus.connect(server.url, { access: { tlsCa: certs.ca, creds: credsFile }, timeoutMs: 3000, reconnect: false }),
      /cannot connect to NATS at tls:\/\//,
    );
  });
});
