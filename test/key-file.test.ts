import { strict as assert } from 'assert';
import { chmodSync, mkdtempSync, writeFileSync } from 'fs';
import * as os from 'os';
import * as path from 'path';
import { readKeyFile, writeKeyFile } from '../cli/key-file';
import { natsUrlOf } from '../cli/nats-flag';

describe('key files', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-keys-'));

  it('are written once, mode 600, and read back', () => {
    const file = path.join(dir, 'a.key');
    writeKeyFile(file);
    assert.equal(readKeyFile(file, 'k').byteLength, 32);
    assert.throws(() => writeKeyFile(file), /cannot create key file/);
  });

  it('are refused when others can read them, or when they hold no key', () => {
    const open = path.join(dir, 'open.key');
    writeKeyFile(open);
    chmodSync(open, 0o644);
    assert.throws(() => readKeyFile(open, 'node: --key-file'), /readable by others \(mode 644\); chmod 600 it/);
    const junk = path.join(dir, 'junk.key');
    writeFileSync(junk, 'not a key', { mode: 0o600 });
    assert.throws(() => readKeyFile(junk, 'node: --key-file'), /not a Baton key/);
  });
});

describe('the NATS server of a command', () => {
  const saved = { b: process.env.BATON_NATS_URL, n: process.env.NATS_URL };
  afterEach(() => {
    for (const [k, v] of [
      ['BATON_NATS_URL', saved.b],
      ['NATS_URL', saved.n],
    ] as const)
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
  });

  it('is --nats, else BATON_NATS_URL, else NATS_URL, so a password need not be on the command line', () => {
    delete process.env.BATON_NATS_URL;
    delete process.env.NATS_URL;
    assert.equal(natsUrlOf(undefined, 'run'), undefined);
    process.env.NATS_URL = 'nats://u:p@127.0.0.1:4333';
    assert.equal(natsUrlOf(undefined, 'run'), 'nats://u:p@127.0.0.1:4333');
    process.env.BATON_NATS_URL = '127.0.0.1:4444';
    assert.equal(natsUrlOf(undefined, 'run'), '127.0.0.1:4444');
    assert.equal(natsUrlOf('127.0.0.1:4555', 'run'), '127.0.0.1:4555');
    process.env.BATON_NATS_URL = 'a b';
    assert.throws(() => natsUrlOf(undefined, 'tap'), /tap: BATON_NATS_URL "a b" is not a URL/);
  });
});
