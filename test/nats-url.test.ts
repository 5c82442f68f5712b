import { strict as assert } from 'assert';
import { NatsBus } from '../transport/nats-bus';
import { NatsServerHandle, startNatsServer } from '../transport/nats-server';
import { natsUrlProblem, parseNatsUrl, redactNatsUrl } from '../transport/nats-url';

describe('the --nats URL', () => {
  it('splits a list of host:port and nats:// URLs into servers, and credentials into a user and password or a token', () => {
    assert.deepEqual(parseNatsUrl('nats://127.0.0.1:4222'), { servers: ['127.0.0.1:4222'], tls: false });
    assert.deepEqual(parseNatsUrl('localhost'), { servers: ['localhost'], tls: false });
    assert.deepEqual(parseNatsUrl(' a:1 , nats://b:2,[::1]:3'), { servers: ['a:1', 'b:2', '[::1]:3'], tls: false });
    assert.deepEqual(parseNatsUrl('nats://alice:p%40ss@h:4222,nats://alice:p%40ss@g:1'), {
      servers: ['h:4222', 'g:1'],
      tls: false,
      user: 'alice',
      pass: 'p@ss',
    });
    assert.deepEqual(parseNatsUrl('nats://s3cr3t@h:4222'), { servers: ['h:4222'], tls: false, token: 's3cr3t' });
  });

  it('takes tls:// servers as TLS, all of them or none', () => {
    assert.deepEqual(parseNatsUrl('tls://a:1,TLS://u:p@b:2'), {
      servers: ['a:1', 'b:2'],
      tls: true,
      user: 'u',
      pass: 'p',
    });
    assert.match(
      String(natsUrlProblem('tls://a:1,b:2')),
      /^"b:2": the servers of one --nats value are all tls:\/\/ or none/,
    );
    assert.match(String(natsUrlProblem('nats://a:1,tls://b:2')), /are all tls:\/\/ or none/);
    assert.equal(redactNatsUrl('tls://u:p@a:1'), 'tls://***@a:1');
  });

  it('names what is wrong, never showing an entry that may hold credentials', () => {
    const cases: [string, RegExp][] = [
      ['', /^"" names no server$/],
      ['  ', /^" {2}" names no server$/],
      ['nats://a:1,,nats://b:2', /^entry 2 is empty$/],
      ['nats://127.0.0.1:99999', /^"nats:\/\/127\.0\.0\.1:99999" is not a URL/],
      ['nats://[::1', /is not a URL/],
      ['a b', /^"a b" is not a URL/],
      ['http://u:secret@h:1', /^entry 1: the scheme must be nats:\/\//],
      ['bad://h:1', /^"bad:\/\/h:1": the scheme must be nats:\/\/ or tls:\/\/, not bad:\/\/$/],
      ['nats://alice:pa,ss@h:1', /^entry 1 is not a URL/],
      ['nats://u:p@a:1,nats://v:q@b:2', /^entry 2: the servers of one --nats value must share their credentials/],
      ['nats://h:1/path', /no path, query or fragment/],
      ['nats://h:1?x=1', /no path, query or fragment/],
      ['nats://alice:50%pass@h:1', /^entry 1: a % in the credentials must start an escape such as %25/],
    ];
    for (const [raw, re] of cases) {
      const p = natsUrlProblem(raw);
      assert.match(String(p), re, raw);
      for (const secret of ['secret', 'pa', 'ss', 'alice'])
        if (raw.includes('@')) assert.ok(!String(p).includes(secret), String(p));
    }
  });

  it('prints each server with *** for the credentials, and a value that does not parse with an @ as ***', () => {
    assert.equal(redactNatsUrl('nats://alice:pa@ss@h:4222, g:1'), 'nats://***@h:4222,nats://***@g:1');
    assert.equal(redactNatsUrl('tok@h'), 'nats://***@h');
    assert.equal(redactNatsUrl('nats://127.0.0.1:4222'), 'nats://127.0.0.1:4222');
    assert.equal(redactNatsUrl('nats://alice:pa,ss@h'), '***');
    assert.equal(redactNatsUrl('a b'), 'a b');
  });

  describe('connecting', function () {
    this.timeout(30000);
    let servers: NatsServerHandle[] = [];
    afterEach(async () => {
      await Promise.all(servers.map((s) => s.stop()));
      servers = [];
    });
    const port = (url: string) => url.slice(url.lastIndexOf(':') + 1);

    it('logs in with the user and password, or the token, of the URL', async () => {
      const [pw, tok] = await Promise.all([
        startNatsServer({ auth: { user: 'alice', password: 'p@ss/w,rd' } }),
        startNatsServer({ auth: { token: 's3cr3t' } }),
      ]);
      servers = [pw, tok];
      for (const url of [
        `nats://alice:${encodeURIComponent('p@ss/w,rd')}@127.0.0.1:${port(pw.url)}`,
        `nats://s3cr3t@127.0.0.1:${port(tok.url)}`,
      ]) {
        const bus = await NatsBus.connect(url);
        await bus.flush();
        assert.ok(!bus.url.includes('s3cr3t') && !bus.url.includes('alice'), bus.url);
        await bus.close();
      }
      await assert.rejects(
        NatsBus.connect(`nats://alice:wrong@127.0.0.1:${port(pw.url)}`, { reconnect: false }),
        (e: Error) =>
          /cannot connect to NATS at nats:\/\/\*\*\*@127\.0\.0\.1:\d+: .*Authorization/i.test(e.message) &&
          !e.message.includes('wrong'),
      );
    });

    it('takes a list of servers and connects to one that is up, whichever place it has', async () => {
      const s = await startNatsServer();
      servers = [s];
      for (const url of [
        `127.0.0.1:1,127.0.0.1:${port(s.url)}`,
        `nats://127.0.0.1:${port(s.url)},nats://127.0.0.1:1`,
      ]) {
        const bus = await NatsBus.connect(url);
        await bus.flush();
        await bus.close();
      }
    });
  });
});
