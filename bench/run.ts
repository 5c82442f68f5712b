// `npm run bench -- <name> [--json]`: the benchmarks, each printing a side-by-side
// comparison measured in one run.

import { spawnSync } from 'child_process';
import * as path from 'path';

const BENCHES: Record<string, string> = {
  sim: 'sim-policies.js',
  bus: 'bus-throughput.js',
  async: 'async-consistency.js',
  train: 'train-throughput.js',
};

const [name, ...rest] = process.argv.slice(2);
if (!name || !(name in BENCHES)) {
  console.error(`usage: npm run bench -- <${Object.keys(BENCHES).join('|')}> [--json]`);
  process.exitCode = 2;
} else {
  const r = spawnSync(process.execPath, [path.join(__dirname, BENCHES[name]), ...rest], { stdio: 'inherit' });
  process.exitCode = r.status ?? 1;
}
