import { strict as assert } from 'assert';
import { JobNameTakenError, claimJob } from '../job/job-claim';
import { LocalBus } from '../transport/local-bus';
import { decodeValue, encodeValue } from '../transport/codec';

describe('claiming a job name on a bus', () => {
  it('refuses a name another launcher holds, naming it, and frees it on release', async () => {
    const bus = new LocalBus();
    const release = await claimJob(bus, 'j', 20);
    await assert.rejects(
      claimJob(bus, 'j', 20),
      (e: Error) =>
        e instanceof JobNameTakenError &&
        new RegExp(
          `job j is already running on this NATS system \\(launcher pid ${process.pid} on .*\\); give this run another --job NAME`,
        ).test(e.message),
    );
    const other = await claimJob(bus, 'k', 20);
    release();
    const again = await claimJob(bus, 'j', 20);
    again();
    other();
    assert.equal(bus.subscriptionCount, 0, 'nothing is left subscribed');
  });

  it('answers a claim only on the reply subject claimJob makes, so a peer cannot make it publish a 5 KB subject', async () => {
    const bus = new LocalBus();
    const release = await claimJob(bus, 'j', 20);
    const heard: string[] = [];
    // Watched with a wildcard: the bus itself refuses a subject of 5 KB (MAX_SUBJECT_BYTES).
    bus.subscribe('>', (subj) => {
      if (subj !== 'baton.j.claim') heard.push(subj);
    });
    for (const reply of [
      `baton.j.claim.reply.${'a'.repeat(5000)}`,
      'baton.j.claim.reply.zz',
      'baton.k.claim.reply.abcdefabcdef',
      'baton._nodes.reply.abcdefabcdef',
    ])
      bus.publish('baton.j.claim', encodeValue({ reply, token: 'other' }));
    assert.deepEqual(heard, []);
    release();
  });

  it('refuses the name with a JobNameTakenError even when the answer holds values that cannot be printed', async () => {
    const bus = new LocalBus();
    bus.subscribe('baton.j.claim', (_s, d) => {
      const q = decodeValue(d) as { reply: string };
      bus.publish(q.reply, encodeValue({ node: { toString: 1 }, pid: { valueOf: 2 }, host: ['x'] }));
    });
    await assert.rejects(
      claimJob(bus, 'j', 20),
      (e: Error) => e instanceof JobNameTakenError && /still hosted by node agent/.test(e.message),
    );
  });
});
