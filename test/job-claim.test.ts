import { strict as assert } from 'assert';
import { JobNameTakenError, claimJob } from '../actors/job-claim';
import { LocalBus } from '../transport/local-bus';

describe('claiming a job name on a bus', () => {
  it('refuses a name another launcher holds, naming it, and frees it on release', async () => {
    const bus = new LocalBus();
    const release = await claimJob(bus, 'j', 20);
    await assert.rejects(claimJob(bus, 'j', 20), (e: Error) =>
      e instanceof JobNameTakenError && new RegExp(`job j is already running on this NATS system \\(launcher pid ${process.pid} on .*\\); give this run another --job NAME`).test(e.message));
    const other = await claimJob(bus, 'k', 20);
    release();
    const again = await claimJob(bus, 'j', 20);
    again();
    other();
    assert.equal(bus.subscriptionCount, 0, 'nothing is left subscribed');
  });
});
