import { strict as assert } from 'assert';
import { renewLeases } from '../job/lease-renewal';

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Renewals of job j, launch L, on nodes a and b for `ms`, each request heard from the nodes `answering`: what was asked and failed. */
async function renewFor(ms: number, leaseMs: number, answering: readonly string[]) {
  const asked: [string, Record<string, unknown>][] = [];
  const failures: Error[] = [];
  const heard = new Map<string, number>();
  const request = (n: string, body: Record<string, unknown>) => {
    asked.push([n, body]);
    if (answering.includes(n)) heard.set(n, Date.now());
  };
  const fail = (e: Error) => failures.push(e);
  const timer = renewLeases({ used: ['a', 'b'], job: 'j', launch: 'L', leaseMs, heard, request, fail });
  await wait(ms);
  clearInterval(timer);
  return { asked, failures };
}

describe('a launch renewing its lease', () => {
  it('asks every node to renew every quarter lease', async () => {
    const { asked, failures } = await renewFor(300, 200, ['a', 'b']);
    assert.deepEqual(asked.slice(0, 2), [
      ['a', { verb: 'renew', job: 'j', launch: 'L' }],
      ['b', { verb: 'renew', job: 'j', launch: 'L' }],
    ]);
    assert.ok(asked.length >= 4, `${asked.length} requests in 300 ms`);
    assert.deepEqual(failures, []);
  });

  it('fails the job with the nodes that answered nothing for a whole lease', async () => {
    const { failures } = await renewFor(400, 200, ['a']);
    assert.ok(failures.length > 0);
    assert.equal(failures[0].message, 'node(s) b answered nothing for 200 ms: gone or hung');
  });
});
