import { strict as assert } from 'assert';
import { ProfileError, parseProfile } from '../models/profile-parse';
import { validProfile as valid } from './helpers-profile';

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

describe('parsing a workload profile', () => {
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
