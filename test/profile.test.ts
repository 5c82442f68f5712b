import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { BUILTIN_PROFILES, ProfileError, loadProfile, packageRoot, parseProfile } from '../models/profile';

const valid = () => ({
  description: 'two blocks',
  depth: 'fixed',
  backwardRatio: 2,
  weightGradFraction: 0.5,
  communication: { latencyMs: 0.1, bandwidthGBps: 10, activationBytes: 1024 },
  layers: [
    { name: 'embed', placement: 'first', forwardMs: 0.5 },
    { name: 'block', count: 2, forwardMs: 3 },
  ],
});

function rejects(json: unknown, pattern: RegExp): void {
  assert.throws(
    () => parseProfile(json, '/tmp/p.json', 'p'),
    (e: unknown) => {
      assert.ok(e instanceof ProfileError, `expected ProfileError, got ${String(e)}`);
      assert.match(e.message, /^\/tmp\/p\.json: /);
      assert.match(e.message, pattern);
      return true;
    },
  );
}

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

  it('rejects a bad number and quotes it with the field', () => {
    rejects({ ...valid(), backwardRatio: 0 }, /backwardRatio must be a finite number > 0 and <= 100, got 0$/);
    rejects(
      { ...valid(), weightGradFraction: 1.5 },
      /weightGradFraction must be a finite number >= 0 and <= 1, got 1\.5$/,
    );
    rejects(
      { ...valid(), communication: { ...valid().communication, bandwidthGBps: '10' } },
      /communication\.bandwidthGBps must be a finite number > 0, got "10"$/,
    );
    rejects(
      { ...valid(), communication: { ...valid().communication, activationBytes: 1.5 } },
      /communication\.activationBytes must be an integer >= 0 and <= 1099511627776, got 1\.5$/,
    );
  });

  it('bounds every duration, size and count, so no value overflows a timer or a message, or stalls partitioning', () => {
    const v = valid();
    rejects(
      { ...v, layers: [{ name: 'x', forwardMs: 1e308, count: 1 }] },
      /layers\[0\]\.forwardMs must be a finite number >= 0 and <= 10000000, got 1e\+308$/,
    );
    rejects(
      { ...v, layers: [{ name: 'x', forwardMs: 1e6, count: 100 }] },
      /layers must be at most 10000000 ms of forward time in all \(count × forwardMs\), got "100000000 ms"$/,
    );
    rejects({ ...v, backwardRatio: 1e308 }, /backwardRatio must be a finite number > 0 and <= 100, got 1e\+308$/);
    rejects(
      { ...v, communication: { ...v.communication, activationBytes: 1e18 } },
      /communication\.activationBytes must be an integer >= 0 and <= 1099511627776, got 1000000000000000000$/,
    );
    rejects(
      { ...v, communication: { ...v.communication, latencyMs: 1e10 } },
      /communication\.latencyMs must be a finite number >= 0 and <= 60000, got 10000000000$/,
    );
    rejects(
      { ...v, communication: { ...v.communication, bandwidthGBps: 1e-9 } },
      /communication must be at most 60000 ms per message before jitter .*, got "1024000\.1 ms for 1024 bytes"$/,
    );
    rejects(
      { ...v, layers: Array.from({ length: 10_001 }, (_, i) => ({ name: `b${i}`, count: 1, forwardMs: 1 })) },
      /layers must be at most 10000 groups, got "10001 groups"$/,
    );
  });

  it('rejects a bad layer and says which one', () => {
    const v = valid();
    rejects(
      { ...v, layers: [v.layers[0], { name: 'block', count: 0, forwardMs: 3 }] },
      /layers\[1\]\.count must be an integer >= 1 and <= 100000, got 0$/,
    );
    rejects(
      { ...v, layers: [v.layers[0], { name: 'block', forwardMs: 3 }] },
      /layers\[1\]\.count must be an integer >= 1 and <= 100000, got undefined$/,
    );
    rejects(
      { ...v, layers: [{ name: '', forwardMs: 1, count: 1 }] },
      /layers\[0\]\.name must be a non-empty string, got ""$/,
    );
    rejects(
      { ...v, layers: [{ name: 'x', forwardMs: -1, count: 1 }] },
      /layers\[0\]\.forwardMs must be a finite number >= 0 and <= 10000000, got -1$/,
    );
    rejects(
      { ...v, layers: [{ name: 'x', forwardMs: 1, count: 1, placement: 'middle' }] },
      /layers\[0\]\.placement must be "first", "split" or "last", got "middle"$/,
    );
    rejects({ ...v, layers: [] }, /layers must be a non-empty array, got \[\]$/);
    rejects({ ...v, layers: [v.layers[0]] }, /at least one "split" group/);
  });

  it('rejects unknown fields so that typos do not pass silently', () => {
    rejects({ ...valid(), backwardRatoi: 2 }, /unknown field "backwardRatoi"; allowed: description, notes/);
    rejects(
      { ...valid(), layers: [{ name: 'x', count: 1, forwardMs: 1, fwdMs: 2 }] },
      /unknown field "layers\[0\]\.fwdMs"/,
    );
  });

  it('rejects a depth that is neither fixed nor per-stage', () => {
    rejects({ ...valid(), depth: 'deep' }, /depth must be "fixed" or "per-stage", got "deep"$/);
  });
});
