import { strict as assert } from 'assert';
import { renewLeases } from '../job/lease-renewal';

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a launch renewing its lease', () => {
  it('asks every node to renew every quarter lease', async () => {
    const asked: [string, Record<string, unknown>][] = [];
    const heard = new Map<string, number>();
    const timer = renewLeases({
      used: ['a', 'b'],
      job: 'j',
      launch: 'L',
      leaseMs: 200,
      heard,
      request: (n, body) => {
        asked.push([n, body]);
        heard.set(n, Date.now());
      },
      fail: () => assert.fail('no node is silent'),
    });
    await wait(300);
    clearInterval(timer);
    assert.deepEqual(asked.slice(0, 2), [
      ['a', { verb: 'renew', job: 'j', launch: 'L' }],
      ['b', { verb: 'renew', job: 'j', launch: 'L' }],
    ]);
    assert.ok(asked.length >= 4, `${asked.length} requests in 300 ms`);
  });

  it('fails the job with the nodes that answered nothing for a whole lease', async () => {
    const failures: Error[] = [];
    const heard = new Map<string, number>();
    const timer = renewLeases({
      used: ['a', 'b'],
      job: 'j',
      launch: 'L',
      leaseMs: 200,
      heard,
      request: (n) => n === 'a' && heard.set(n, Date.now()),
      fail: (e) => failures.push(e),
    });
    await wait(400);
    clearInterval(timer);
    assert.ok(failures.length > 0);
    assert.equal(failures[0].message, 'node(s) b answered nothing for 200 ms: gone or hung');
  });
});
