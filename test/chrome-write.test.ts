import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ChromeEvent, toChromeTrace } from '../cli/trace/chrome';
import { writeChromeTrace } from '../cli/trace/chrome-write';
import { forwardEnd, forwardStart } from './helpers-events';

describe('writing a trace file', () => {
  it('writes what JSON.stringify would, and a trace too long for one string', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-trace-'));
    try {
      const file = path.join(dir, 't.json');
      const small = toChromeTrace([forwardStart(1), forwardEnd(2)], {
        job: 'j',
        stages: 2,
        title: 'a "quoted" title',
        config: { policy: 'bf' },
      });
      writeChromeTrace(file, small);
      assert.equal(fs.readFileSync(file, 'utf8'), JSON.stringify(small));
      // Nine events of 64 MiB of args: 576 MiB of JSON, over the longest string V8 makes.
      const big = toChromeTrace([], { job: 'j', stages: 1 });
      const event: ChromeEvent = {
        name: 'big',
        ph: 'i',
        ts: 0,
        pid: 0,
        tid: 0,
        args: { pad: 'x'.repeat(64 * 1024 * 1024) },
      };
      big.traceEvents.push(...Array.from({ length: 9 }, () => event));
      writeChromeTrace(file, big);
      const size = fs.statSync(file).size;
      assert.ok(size > 9 * 64 * 1024 * 1024, `${size} bytes`);
      const fd = fs.openSync(file, 'r');
      try {
        const tail = Buffer.alloc(200);
        fs.readSync(fd, tail, 0, 200, size - 200);
        assert.match(
          tail.toString(),
          /"}}\],"displayTimeUnit":"ms","metadata":\{"job":"j","stages":1,"generator":"baton","time_origin_ms":0,"baton_events":\[\]\}\}$/,
        );
      } finally {
        fs.closeSync(fd);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
