// A CPU quota for processes a benchmark starts, so a node is really slower: a cgroup made
// for this run and removed after it, with cgroup v2's cpu.max where the cpu controller is
// mounted unified (/sys/fs/cgroup/cpu.max), else cgroup v1's cpu controller
// (/sys/fs/cgroup/cpu/…: cpu.cfs_quota_us over cpu.cfs_period_us). A process is put in
// it before it runs any of its own code: spawned through `sh -c 'echo $$ > PROCS; exec …'`.
// Needs root (or a delegated cgroup); without it, make() says what it could not do.
//
// The period is short (10 ms), so a task of a few milliseconds is slowed too, not run
// at full speed while the period's budget lasts. The cgroup's weight is raised
// (QUOTA_WEIGHT_TASKS ordinary tasks' worth: cpu.shares in v1, cpu.weight in v2) so that on
// a machine busy with other work its processes still get their quota: the quota, not the
// other load, sets their speed, and the quota bounds what they take from the others.

import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'fs';
import { join } from 'path';
import { onProcessEnd } from '../transport/process-cleanup';

export const QUOTA_PERIOD_US = 10_000;
export const QUOTA_WEIGHT_TASKS = 8;

export interface CpuQuota {
  /** Where the cgroup is and how its limit is set, for the report. */
  readonly how: string;
  /** The command and arguments that run `cmd args…` inside the cgroup. */
  wrap(cmd: string, args: readonly string[]): [string, string[]];
  /** Removes the cgroup (its processes must have ended); also done at exit. */
  remove(): void;
}

function unifiedCpu(): string | null {
  const root = '/sys/fs/cgroup';
  const controllers = join(root, 'cgroup.controllers');
  if (!existsSync(controllers) || !readFileSync(controllers, 'utf8').split(/\s+/).includes('cpu')) return null;
  // A child of the root gets the cpu controller only when the root hands it down.
  const subtree = join(root, 'cgroup.subtree_control');
  if (!readFileSync(subtree, 'utf8').split(/\s+/).includes('cpu')) writeFileSync(subtree, '+cpu');
  return root;
}

/** A new cgroup whose processes share `cpus` CPUs' worth of time (0.3: 30% of one CPU). */
export function makeCpuQuota(name: string, cpus: number): CpuQuota {
  if (!(cpus > 0 && cpus <= 64)) throw new RangeError(`cpu quota: ${cpus} CPUs is not a quota`);
  const quotaUs = Math.max(1000, Math.round(cpus * QUOTA_PERIOD_US));
  const unified = unifiedCpu();
  const v1 = '/sys/fs/cgroup/cpu';
  if (!unified && !existsSync(join(v1, 'cpu.cfs_quota_us')))
    throw new Error('cpu quota: neither cgroup v2 with the cpu controller nor cgroup v1 cpu is mounted');
  const dir = join(unified ?? v1, name);
  try {
    mkdirSync(dir);
  } catch (e) {
    throw new Error(`cpu quota: cannot create the cgroup ${dir} (root needed): ${(e as Error).message}`);
  }
  const remove = () => {
    if (existsSync(dir)) rmdirSync(dir);
  };
  const forget = onProcessEnd(remove);
  try {
    if (unified) {
      writeFileSync(join(dir, 'cpu.max'), `${quotaUs} ${QUOTA_PERIOD_US}`);
      writeFileSync(join(dir, 'cpu.weight'), String(100 * QUOTA_WEIGHT_TASKS));
    } else {
      writeFileSync(join(dir, 'cpu.cfs_period_us'), String(QUOTA_PERIOD_US));
      writeFileSync(join(dir, 'cpu.cfs_quota_us'), String(quotaUs));
      writeFileSync(join(dir, 'cpu.shares'), String(1024 * QUOTA_WEIGHT_TASKS));
    }
  } catch (e) {
    remove();
    forget();
    throw e;
  }
  const procs = join(dir, 'cgroup.procs');
  const how = unified
    ? `cgroup v2 ${dir}: cpu.max "${quotaUs} ${QUOTA_PERIOD_US}", cpu.weight ${100 * QUOTA_WEIGHT_TASKS}`
    : `cgroup v1 ${dir}: cpu.cfs_quota_us ${quotaUs} per cpu.cfs_period_us ${QUOTA_PERIOD_US}, cpu.shares ${1024 * QUOTA_WEIGHT_TASKS}`;
  return {
    how,
    wrap: (cmd, args) => ['/bin/sh', ['-c', `echo $$ > '${procs}' && exec "$@"`, 'sh', cmd, ...args]],
    remove: () => {
      remove();
      forget();
    },
  };
}
