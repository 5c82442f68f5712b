import { strict as assert } from 'assert';
import { LaunchLink } from '../job/launch-link';
import { STANDALONE_NODES, replyBox } from '../actors/node-agent';
import { newRejectTally } from '../base/reject-tally';
import { decodeValue, encodeValue } from '../transport/codec';
import { LocalBus } from '../transport/local-bus';

/** A link of launch L of job j on an in-process bus, with what it asks each node and the failures it reports. */
function link(nodes = ['a', 'b']) {
  const bus = new LocalBus();
  const rejects = newRejectTally();
  const failures: Error[] = [];
  const l = new LaunchLink(bus, STANDALONE_NODES, {
    job: 'j',
    launch: 'L',
    nodes,
    rejects,
    fail: (e) => failures.push(e),
  });
  const subs = l.subscribe();
  const asked: Record<string, unknown>[] = [];
  for (const n of nodes)
    bus.subscribe(STANDALONE_NODES.request(n), (_s, d) => asked.push({ to: n, ...(decodeValue(d) as object) }));
  const reply = (r: Record<string, unknown>) => bus.publish(replyBox('j', 'L'), encodeValue(r));
  const hello = (name: string) => bus.publish(STANDALONE_NODES.announce, encodeValue({ verb: 'hello', name }));
  return { bus, l, subs, rejects, failures, asked, reply, hello };
}

describe("a launch's link to its node agents", () => {
  it('asks a node on its request subject, naming the reply box', () => {
    const { l, asked } = link();
    l.request('b', { verb: 'status', job: 'j' });
    assert.deepEqual(asked, [{ to: 'b', verb: 'status', job: 'j', reply: replyBox('j', 'L') }]);
  });

  it('keeps the replies in order, but not renewals, and hears from a node with each', () => {
    const { l, reply } = link();
    reply({ verb: 'hosting', name: 'a' });
    reply({ verb: 'renewed', name: 'b' });
    reply({ verb: 'status', name: 'b', statuses: [] });
    assert.deepEqual(
      l.replies.queue.map((r) => [r.verb, r.name]),
      [
        ['hosting', 'a'],
        ['status', 'b'],
      ],
    );
    assert.deepEqual([...l.heard.keys()].sort(), ['a', 'b']);
  });

  it('counts and leaves out a malformed reply, and reports a reply that fails the job', () => {
    const { l, reply, rejects, failures } = link();
    reply({ verb: 'finished', name: 'a', events: [1] });
    assert.equal(rejects.count, 1);
    assert.match(rejects.first[0], /a finished reply from node a refused: its events must be a map/);
    assert.equal(l.heard.size, 0);
    reply({ verb: 'leaving', name: 'b', reason: 'SIGTERM' });
    assert.deepEqual(
      failures.map((e) => e.message),
      ['node b left during the job (SIGTERM)'],
    );
    assert.equal(l.replies.queue.length, 1);
  });

  it('pings the nodes until each has said hello, and names the ones that did not', async () => {
    const { l, asked, hello } = link();
    const waiting = l.announced(['a', 'b'], 5000, (p) => p);
    await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(
      asked.map((x) => [x.to, x.verb]),
      [
        ['a', 'ping'],
        ['b', 'ping'],
      ],
    );
    hello('b');
    hello('a');
    assert.deepEqual(
      (await waiting).map((r) => r.name),
      ['b', 'a'],
    );
    await assert.rejects(
      l.announced(['a', 'c'], 50, (p) => p),
      /waiting for node agents c to announce themselves/,
    );
    l.close();
  });
});
