import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { resolveConfig } from '../job/config';
import { runJob } from '../job/run-local';
import { writeTraceFiles } from '../cli/trace-output';
import { ChromeEvent } from '../cli/trace/chrome';

describe('trace files written by a run', () => {
  it('hold the measured iterations only, as the statistics do', async () => {
    const r = await runJob(
      resolveConfig({ stages: 2, microbatches: 3, iterations: 2, warmupIterations: 1, policy: 'bf' }),
      { clock: 'virtual' },
    );
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-trace-'));
    try {
      const file = path.join(dir, 't.json');
      writeTraceFiles(r, file);
      const trace = JSON.parse(fs.readFileSync(file, 'utf8')) as { traceEvents: ChromeEvent[] };
      const tasks = trace.traceEvents.filter((e) => e.ph === 'X' && (e.cat === 'F' || e.cat === 'B'));
      assert.equal(tasks.length, r.totals.tasks);
      assert.deepEqual([...new Set(tasks.map((e) => (e.args as { iteration: number }).iteration))].sort(), [1, 2]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
