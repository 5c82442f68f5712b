import { strict as assert } from 'assert';
import { natsUrlProblem, redactNatsUrl } from '../transport/nats-url';

describe('the --nats URL', () => {
  it('takes the forms nats.js takes: a list of host:port or nats:// and tls:// URLs, with credentials', () => {
    for (const ok of ['nats://127.0.0.1:4222', '127.0.0.1:4222', 'localhost', 'tls://h:1', 'nats://u:p@h:4222', 'nats://tok@h', 'nats://a:1, nats://b:2', 'nats://[::1]:4222'])
      assert.equal(natsUrlProblem(ok), null, ok);
  });

  it('names what is wrong, with any password masked', () => {
    const cases: [string, RegExp][] = [
      ['', /names no server/],
      ['  ', /names no server/],
      ['nats://a:1,,nats://b:2', /an empty entry/],
      ['nats://127.0.0.1:99999', /"nats:\/\/127\.0\.0\.1:99999" is not a URL/],
      ['nats://[::1', /is not a URL/],
      ['a b', /"a b" is not a URL/],
      ['http://u:secret@h:1', /"http:\/\/\*\*\*@h:1": the scheme must be nats:\/\/ or tls:\/\//],
      ['nats://h:1/path', /no path, query or fragment/],
      ['nats://h:1?x=1', /no path, query or fragment/],
    ];
    for (const [raw, re] of cases) {
      const p = natsUrlProblem(raw);
      assert.match(String(p), re, raw);
      assert.ok(!String(p).includes('secret'), String(p));
    }
  });

  it('masks users, passwords and tokens in every entry of a list, and leaves the rest as it was', () => {
    assert.equal(redactNatsUrl('nats://alice:s3cret@h:4222,tls://tok@g:1, k:2'), 'nats://***@h:4222,tls://***@g:1, k:2');
    assert.equal(redactNatsUrl('alice:pw@h:4222'), '***@h:4222');
    assert.equal(redactNatsUrl('nats://127.0.0.1:4222'), 'nats://127.0.0.1:4222');
  });
});
