// `npm run bench -- <name> [flags] [--json]` (`--help` lists them): the benchmarks, each printing a side-by-side
// comparison measured in one run.

import { spawn } from 'child_process';
import { constants } from 'os';
import * as path from 'path';

const BENCHES: Record<string, { file: string; flags: string; what: string }> = {
  sim: {
    file: 'sim-policies.js',
    flags: '[--reference offline]',
    what: 'every policy against binding 1f1b on the virtual clock (llm, multimodal; P 8-32), P=32 wall time, arbiter cost',
  },
  hetero: {
    file: 'hetero-sim.js',
    flags: '[--speeds 1,1,1,0.5,1,0.33,1,1] [--microbatches M] [--seed S]',
    what: 'uniform against speed-aware partition on nodes of uneven speeds (virtual clock, P=8; bf, 1f1b; uniform and llm profiles): makespan, efficiency',
  },
  'hetero-real': {
    file: 'hetero-real.js',
    flags: '[--rounds R] [--layers L] [--iterations N] [--slow-cpus C]',
    what: 'uniform against speed-aware partition of a GPT trained on two node agents, one slowed by a cgroup CPU quota (root): calibrated speeds, tokens/s by round, median ratio against the ideal the speeds predict',
  },
  tp: {
    file: 'tp-breakdown.js',
    flags: '[--iterations I] [--seed S] [--seeds N] [--rank-jitter shared|independent] [--part both|rq2|rq1]',
    what: 'tensor-parallel groups on the virtual clock, median [min-max] over seeds: RQ2 breakdown (multimodal, PP=16, TP 1/2/4: compute, blocking, TP peer wait, TP coordination) and the RQ1 grid (TP 1/2 x PP 8/16 x llm/multimodal: bf, bfw over binding 1f1b, limit 32 and depth, peak in-flight)',
  },
  reference: {
    file: 'offline-reference.js',
    flags: '[--seeds N] [--stages 8,16] [--limits 8,32,depth] [--relax 1-7]',
    what: 'lower bound and clairvoyant offline reference against bf, bfw and binding 1f1b (llm, multimodal; P 8, 16; limits 8, 32, depth; 10 seeds): medians and ranges',
  },
  bus: {
    file: 'bus-throughput.js',
    flags: '[--mb MB] [--messages N] [--repeats R] [--max-payload MB] [--processes 1|2|both]',
    what: "tensor messages through Baton's codec + NATS bus against raw nats.js, zero-copy decode",
  },
  async: {
    file: 'async-consistency.js',
    flags: '[--updates N] [--data FILE]',
    what: 'asynchronous training: consistency policies x P on tinyshakespeare, loss-curve SVG',
  },
  fresco: {
    file: 'fresco-bench.js',
    flags: '[--quick | --preset small|paper] [--report-only] [--phases ABC] [--data FILE] [--out DIR]',
    what: "the FRESCO comparison: the paper's baselines x P, LR sweep, seeds (median, range), the P=1 projection control, alpha sweep; cached and resumable under out/fresco-sweep",
  },
  overhead: {
    file: 'run-overhead.js',
    flags: '[--stages 2,4,8] [--rounds R] [--microbatches M] [--no-realtime]',
    what: "the runtime's overhead on the real clock (uniform tasks, one process per stage over NATS) against (M+P-1)(F+B), default and real-time scheduling class side by side, split along the critical path, beside the same pipeline with no Baton code (the floor of the design on this machine)",
  },
  profile: {
    file: 'compute-profile.js',
    flags: '[--backends wasm,cpu] [--microbatches M] [--layers L]',
    what: "one training step of the train bench's char-GPT by tfjs kernel (calls, exclusive time) and by phase, time outside kernels, per backend",
  },
  peer: {
    file: 'torch-peer.js',
    flags: '[--rounds R] [--iterations N] [--layers L]',
    what: 'the same char-GPT trained by PyTorch (Debian python3-torch) and by Baton: 1 process with 1 and 2 threads, a 2-stage pipeline on 2 cores, rounds in turn',
  },
  faults: {
    file: 'faults.js',
    flags: '[--repeats R] [--iterations N]',
    what: 'recovery by replay: SIGKILL and SIGSTOP of a stage process mid-iteration (sync train, GPT, P = 4, over NATS): detected after, recovered after, iterations replayed, result equal; the cost of keeping the stages state',
  },
  train: {
    file: 'train-throughput.js',
    flags: '[--rounds R] [--iterations N] [--layers L] [--microbatch-size B] [--buffer-limit N] [--no-ceiling]',
    what: "tokens/s of a 2-process pipeline over NATS against one process, alternating rounds, each stage's split of time, the machine's two-process ceiling",
  },
};

function usage(): string {
  const rows = Object.entries(BENCHES).map(
    ([name, b]) => `  ${name.padEnd(8)} ${b.flags ? `${b.flags}\n           ` : ''}${b.what}`,
  );
  return (
    `usage: npm run bench -- <${Object.keys(BENCHES).join('|')}> [flags] [--json]\n` +
    `       (with --json, npm run -s bench -- …: npm otherwise prints its own lines on stdout before the JSON)\n\n${rows.join('\n')}`
  );
}

const [name, ...rest] = process.argv.slice(2);
if (name === '--help' || name === '-h') {
  console.log(usage());
} else if (!name || !Object.hasOwn(BENCHES, name)) {
  console.error(`${name ? `unknown benchmark ${JSON.stringify(name)}` : 'which benchmark?'}\n${usage()}`);
  process.exitCode = 2;
} else {
  // A stop sent to this process alone (kill, a supervisor) stops the benchmark too, instead of orphaning it.
  // The handlers come first (the benchmark's process exists before spawn() returns); they run
  // from the event loop, so never before `child` is set.
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(sig, () => child.kill(sig));
  const child = spawn(process.execPath, [path.join(__dirname, BENCHES[name].file), ...rest], { stdio: 'inherit' });
  child.on('exit', (code, signal) => {
    process.exitCode = code ?? (signal ? 128 + constants.signals[signal] : 1);
  });
}
