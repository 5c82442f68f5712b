import { strict as assert } from 'assert';
import { resolveConfig } from '../actors/config';
import { ANNOUNCE_SUBJECT, NODES_PREFIX, NodeAgent, nodeSubject } from '../actors/node';
import { decodeValue, encodeValue } from '../transport/codec';
import { LocalBus } from '../transport/local-bus';

const REPLY = `${NODES_PREFIX}.reply.test`;

/** A node agent on an in-process bus, with what it answers and logs. */
function agentOnLocalBus() {
  const bus = new LocalBus();
  const logs: string[] = [];
  const replies: Record<string, unknown>[] = [];
  const hellos: Record<string, unknown>[] = [];
  bus.subscribe(REPLY, (_s, d) => replies.push(decodeValue(d) as Record<string, unknown>));
  bus.subscribe(ANNOUNCE_SUBJECT, (_s, d) => hellos.push(decodeValue(d) as Record<string, unknown>));
  const agent = new NodeAgent({ name: 'n1', bus, log: (l) => logs.push(l) });
  agent.start();
  const request = (req: Record<string, unknown>) => bus.publish(nodeSubject('n1'), encodeValue(req));
  return { bus, agent, logs, replies, hellos, request };
}

const settle = () => new Promise((r) => setTimeout(r, 20));

describe('the node agent', () => {
  it('survives a request whose reply subject it cannot publish to, and keeps serving', async () => {
    const { agent, logs, hellos, request } = agentOnLocalBus();
    const before = hellos.length;
    for (const reply of [`${NODES_PREFIX}.reply.>`, `${NODES_PREFIX}.reply.a b`, `${NODES_PREFIX}.reply..x`]) {
      request({ verb: 'nope', reply });
      request({ verb: 'status', reply, job: 'j' });
    }
    await settle();
    assert.ok(agent.rejected >= 3, `rejected ${agent.rejected}`);
    assert.ok(logs.some((l) => /cannot answer on/.test(l)), logs.join('\n'));
    request({ verb: 'ping' });
    await settle();
    assert.equal(hellos.length, before + 1, 'the agent still answers after the bad requests');
  });

  it('refuses to host a stage twice and leaves nothing of the refused job behind', async () => {
    const { bus, replies, request } = agentOnLocalBus();
    const subscriptions = bus.subscriptionCount;
    const config = resolveConfig({ job: 'dup', stages: 2, microbatches: 2, policy: 'bf', profile: 'uniform' });
    request({ verb: 'host', reply: REPLY, config, stages: [0, 0] });
    await settle();
    assert.equal(replies.at(-1)?.verb, 'error');
    assert.match(String(replies.at(-1)?.message), /stages must not repeat/);
    assert.equal(bus.subscriptionCount, subscriptions, 'no subscription of the refused job is left');
    request({ verb: 'host', reply: REPLY, config, stages: [0, 1] });
    await settle();
    assert.equal(replies.at(-1)?.verb, 'hosting', JSON.stringify(replies.at(-1)));
    assert.equal(bus.subscriptionCount, subscriptions + 2 * 4);
    request({ verb: 'abort', reply: REPLY, job: 'dup' });
    await settle();
    assert.equal(bus.subscriptionCount, subscriptions);
  });
});
