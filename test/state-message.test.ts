import { strict as assert } from 'assert';
import { stateMessageHead } from '../job/state-message';
import { encodeValue } from '../transport/codec';
import { subject } from '../transport/subjects';

const o = { job: 'j', launch: 'L1', stages: 2, noLaunch: 'one following' };
const on = (stage: number | string) => subject('j', 'state', stage);
const msg = (over: Record<string, unknown> = {}) =>
  encodeValue({ verb: 'state', job: 'j', launch: 'L1', stage: 1, ...over });

describe('the head of a state message', () => {
  it('gives the message and its stage when it is of this job, launch and subject', () => {
    const head = stateMessageHead(on(1), msg({ extra: 3 }), o);
    assert.ok(typeof head !== 'string');
    assert.equal(head.stage, 1);
    assert.equal(head.v.extra, 3);
  });

  it('says why it refuses bytes that do not decode, another verb or job, another launch, or a stage its subject does not name', () => {
    assert.equal(typeof stateMessageHead(on(1), new Uint8Array([0xff, 0x00, 0x13]), o), 'string');
    assert.equal(stateMessageHead(on(1), msg({ verb: 'beat' }), o), 'not a state message of this job');
    assert.equal(stateMessageHead(on(1), msg({ job: 'k' }), o), 'not a state message of this job');
    assert.equal(stateMessageHead(on(1), encodeValue([1, 2]), o), 'not a state message of this job');
    assert.match(stateMessageHead(on(1), msg({ launch: 'L0' }), o) as string, /of launch "L0", not L1/);
    assert.match(
      stateMessageHead(on(1), msg(), { ...o, launch: undefined }) as string,
      /of launch "L1", not one following/,
    );
    for (const stage of [2, -1, 0.5, '1', null])
      assert.match(stateMessageHead(on(1), msg({ stage }), o) as string, /^stage .* on /, String(stage));
    assert.match(stateMessageHead(on(0), msg(), o) as string, /^stage 1 on "baton\.j\.state\.0"/);
  });
});
