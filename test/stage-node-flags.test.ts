import { strict as assert } from 'assert';
import { UsageError } from '../cli/args';
import { DEFAULT_STAGE_NODE_FLAGS, STAGE_NODE_FLAGS_ENV, stageNodeFlags } from '../cli/stage-node-flags';

describe('stage process Node flags', () => {
  it('are the defaults (single-threaded GC) when the environment sets none', () => {
    assert.deepEqual([...stageNodeFlags({})], ['--single-threaded-gc']);
    assert.equal(stageNodeFlags({}), DEFAULT_STAGE_NODE_FLAGS);
  });

  it("are the environment variable's space-separated flags when it is set, and none when it is empty", () => {
    assert.deepEqual(
      stageNodeFlags({ [STAGE_NODE_FLAGS_ENV]: '  --max-old-space-size=8192   --single-threaded-gc ' }),
      ['--max-old-space-size=8192', '--single-threaded-gc'],
    );
    assert.deepEqual(stageNodeFlags({ [STAGE_NODE_FLAGS_ENV]: '' }), []);
  });

  it('refuse a word that is not a flag (Node would take it for the script), naming it', () => {
    assert.throws(
      () => stageNodeFlags({ [STAGE_NODE_FLAGS_ENV]: '--single-threaded-gc evil.js' }),
      (e: Error) =>
        e instanceof UsageError && e.message.includes(STAGE_NODE_FLAGS_ENV) && e.message.includes('"evil.js"'),
    );
  });
});
