import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { BUILTIN_PROFILES, ProfileError, loadProfile, packageRoot } from '../models/profile';
import { validProfile as valid } from './helpers-profile';

describe('workload profiles', () => {
  it('finds the package root from the compiled module', () => {
    assert.ok(fs.existsSync(path.join(packageRoot(), 'package.json')));
    assert.ok(fs.existsSync(path.join(packageRoot(), 'models', 'profiles', 'uniform.json')));
  });

  it('loads every built-in profile by name with a description and notes', () => {
    for (const name of BUILTIN_PROFILES) {
      const p = loadProfile(name);
      assert.equal(p.name, name);
      assert.ok(p.description.length > 80, `${name} description too short`);
      assert.ok(p.notes.length > 0);
      assert.ok(p.source.endsWith(path.join('models', 'profiles', `${name}.json`)));
    }
  });

  it('gives uniform 10 ms blocks that deepen with the pipeline and free communication', () => {
    const p = loadProfile('uniform');
    assert.equal(p.depth, 'per-stage');
    assert.deepEqual(
      p.layers.map((l) => [l.count, l.forwardMs]),
      [[1, 10]],
    );
    assert.equal(p.backwardRatio, 2);
    assert.equal(p.weightGradFraction, 0.5);
    assert.equal(p.communication.latencyMs, 0);
    assert.equal(p.communication.activationBytes, 0);
  });

  it('loads a user profile from a path and names it after the file', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-profile-'));
    const file = path.join(dir, 'mine.json');
    fs.writeFileSync(file, JSON.stringify(valid()));
    const p = loadProfile(file);
    assert.equal(p.name, 'mine');
    assert.equal(p.layers[0].count, 1, 'a first-placed layer defaults to count 1');
    assert.equal(p.layers[1].placement, 'split', 'placement defaults to split');
    fs.rmSync(dir, { recursive: true });
  });

  it('rejects an unknown built-in name and lists the built-ins', () => {
    assert.throws(() => loadProfile('gpt5'), /unknown profile "gpt5": built-ins are uniform, llm, multimodal/);
  });

  it('names the file when it cannot be read or parsed', () => {
    assert.throws(() => loadProfile('/nonexistent/x.json'), /profile "\/nonexistent\/x\.json" does not exist/);
    assert.throws(
      () => loadProfile('/dev/zero'),
      (e: unknown) =>
        e instanceof ProfileError && /profile "\/dev\/zero" is a device, not a regular file/.test(e.message),
    );
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-profile-'));
    const file = path.join(dir, 'broken.json');
    fs.writeFileSync(file, '{"description": ');
    assert.throws(
      () => loadProfile(file),
      (e: unknown) => e instanceof ProfileError && e.message.startsWith(`${file}: not valid JSON`),
    );
    fs.rmSync(dir, { recursive: true });
  });
});
