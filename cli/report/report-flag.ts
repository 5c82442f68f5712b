// --report, of the commands that run a job and can write its HTML report directly (run, train).

import { FlagSpec } from '../args';

export const REPORT_FLAG: FlagSpec = {
  name: 'report',
  type: 'string',
  metavar: 'FILE.html',
  help: 'write one self-contained HTML report of the run (tables, Gantt charts, utilization, latencies, loss curves; as baton report)',
};
