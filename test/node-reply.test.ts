import { strict as assert } from 'assert';
import { answerOn } from '../actors/node-reply';
import { NODES_PREFIX } from '../actors/node-agent';
import { Bus } from '../transport/bus';
import { decodeValue } from '../transport/codec';
import { LocalBus } from '../transport/local-bus';
import { PayloadTooLargeError } from '../transport/nats-bus';

const REPLY = `${NODES_PREFIX}.reply.test`;

/** A bus with what is published on REPLY, whose publish throws `tooBig` bytes and more. */
function replyBus(tooBig = Infinity) {
  const bus = new LocalBus();
  const got: Record<string, unknown>[] = [];
  bus.subscribe(REPLY, (_s, d) => got.push(decodeValue(d) as Record<string, unknown>));
  const publish = bus.publish.bind(bus);
  bus.publish = (subject, data) => {
    if (data.byteLength >= tooBig) throw new PayloadTooLargeError(subject, data.byteLength, tooBig);
    publish(subject, data);
  };
  return { bus: bus as Bus, got };
}

describe('a node agent answering on a reply subject', () => {
  it('publishes the answer with its name on a launcher’s reply subject', () => {
    const { bus, got } = replyBus();
    const refused: string[] = [];
    answerOn(bus, 'n1', REPLY, { verb: 'renewed', job: 'j' }, (l) => refused.push(l));
    assert.deepEqual(got, [{ verb: 'renewed', job: 'j', name: 'n1' }]);
    assert.deepEqual(refused, []);
  });

  it('answers nothing to a request without a reply subject, and refuses a reply subject that is not valid', () => {
    const { bus, got } = replyBus();
    const refused: string[] = [];
    for (const to of [undefined, 42, 'baton.elsewhere'])
      answerOn(bus, 'n1', to, { verb: 'renewed' }, (l) => refused.push(l));
    assert.equal(refused.length, 0);
    answerOn(bus, 'n1', `${REPLY}..x`, { verb: 'renewed' }, (l) => refused.push(l));
    assert.deepEqual(got, []);
    assert.deepEqual(refused, [`node n1: cannot answer on "${REPLY}..x": not a valid subject`]);
  });

  it('follows an answer too big for the server with a small error saying so', () => {
    const { bus, got } = replyBus(300);
    const refused: string[] = [];
    answerOn(bus, 'n1', REPLY, { verb: 'status', statuses: 'x'.repeat(400) }, (l) => refused.push(l));
    assert.equal(refused.length, 1);
    assert.match(refused[0], /^node n1: cannot answer on "baton\._nodes\.reply\.test": publish to /);
    assert.equal(got.length, 1);
    assert.equal(got[0].verb, 'error');
    assert.equal(got[0].name, 'n1');
    assert.match(String(got[0].message), /^the "status" answer is \d+ bytes, over the server's max_payload of 300$/);
  });
});
