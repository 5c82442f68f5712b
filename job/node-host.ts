// What hosting a job's stages means on a node agent (actors/node-agent.ts): the host
// request's config checked and resolved, the files it names allowed or refused, the job
// planned, the backend loaded, each stage wired as in a single-process job.

import { quoteValue } from '../base/quote';
import { NodeAgent, NodeAgentOptions, StageHost } from '../actors/node-agent';
import { isModulePath } from '../policies/registry';
import { isProfilePath } from '../models/profile';
import { answerJobClaims } from './job-claim';
import { JobConfig, resolveConfig } from './config';
import { checkConfigShape } from './config-shape';
import { durationModelFor, laneDurationsFor, loadTrainingBackend, planJob, wireStage } from './wire-stage';
import { Lane } from '../transport/lanes';
import { DurationModel } from '../models/durations';
import { InputError } from '../base/errors';
import { checkHostRecovery, stageRecoveryOf } from './stage-recovery';
import { realpathSync } from 'fs';
import * as path from 'path';

/** A host request naming a file (policy module, profile, corpus, checkpoint) outside the agent's --allow-files. */
export class FilesNotAllowedError extends InputError {
  override name = 'FilesNotAllowedError';
}

/** A file a job config names on the hosting machine: what it is for, and its path as given. */
export interface NamedFile {
  readonly what: string;
  readonly path: string;
}

/**
 * The files on the hosting machine a job config names: a policy module (run), a profile
 * file, a training corpus and, when resuming, a checkpoint directory (read).
 */
export function filesOfJob(cfg: JobConfig): NamedFile[] {
  return [
    ...(typeof cfg.policy === 'string' && isModulePath(cfg.policy)
      ? [{ what: 'policy module', path: cfg.policy }]
      : []),
    ...(typeof cfg.profile === 'string' && isProfilePath(cfg.profile)
      ? [{ what: 'profile file', path: cfg.profile }]
      : []),
    ...(typeof cfg.train?.data === 'string' ? [{ what: 'corpus file', path: cfg.train.data }] : []),
    // Stages read a checkpoint only to resume (the launcher writes them).
    ...(typeof cfg.train?.checkpoint === 'string' && cfg.train.startIteration > 0
      ? [{ what: 'checkpoint directory', path: cfg.train.checkpoint }]
      : []),
  ];
}

/** The files a job config names, as errors name them. */
export function filesAJobNames(cfg: JobConfig): string[] {
  return filesOfJob(cfg).map((f) => `${f.what} ${quoteValue(f.path)}`);
}

/** `p` made absolute with its links resolved (as far as it exists), so `..` and links cannot leave an allowed directory. */
export function realPath(p: string): string {
  const abs = path.resolve(p);
  try {
    return realpathSync(abs);
  } catch {
    const parent = path.dirname(abs);
    return parent === abs ? abs : path.join(realPath(parent), path.basename(abs));
  }
}

/** True when `file` (a realPath) is one of `allowed` (realPaths of files or directories) or lies inside one. */
export function isAllowedPath(file: string, allowed: readonly string[]): boolean {
  return allowed.some((a) => file === a || file.startsWith(a.endsWith(path.sep) ? a : a + path.sep));
}

/** The files a job names must be among the agent's --allow-files (or inside one of its directories). */
function refuseFiles(cfg: JobConfig, allowed: readonly string[]): void {
  const outside = filesOfJob(cfg).filter((f) => !isAllowedPath(realPath(f.path), allowed));
  if (outside.length > 0)
    throw new FilesNotAllowedError(
      `host: the job names ${outside.map((f) => `${f.what} ${quoteValue(f.path)}`).join(' and ')}; this agent uses only the files and directories of its baton node --allow-files (${allowed.length > 0 ? allowed.map((a) => quoteValue(a)).join(', ') : 'none given'})`,
    );
}

/** A host request's config as a node agent's plan. */
export const jobStageHost: StageHost = (config, o) => {
  const cfg: JobConfig = resolveConfig(checkConfigShape(config));
  refuseFiles(cfg, o.allowedFiles);
  const plan = planJob(cfg);
  const recovery = checkHostRecovery(o.recovery, plan.shape.stages, cfg.mode === 'async');
  let durations: DurationModel | null = null;
  const durationsOf = () => (durations ??= durationModelFor(cfg, plan.shape));
  return {
    job: cfg.job,
    stages: plan.shape.stages,
    ranks: cfg.tp,
    replicas: cfg.dp,
    check: () => void durationsOf(),
    prepare: async () => {
      if (cfg.train) await loadTrainingBackend(cfg.train);
    },
    wire: ({ lane: at, ...w }) => {
      if (!at)
        return wireStage({ ...w, cfg, plan, durations: durationsOf(), recovery: stageRecoveryOf(recovery, w.stage) });
      const lane: Lane = { ...at, ranks: cfg.tp, replicas: cfg.dp };
      return wireStage({ ...w, cfg, plan, lane, durations: laneDurationsFor(cfg, plan.shape, lane) });
    },
    answerClaims: (bus, info) => answerJobClaims(bus, cfg.job, info),
  };
};

/** A node agent that hosts Baton jobs' stages. */
export function newNodeAgent(o: Omit<NodeAgentOptions, 'stageHost'>): NodeAgent {
  return new NodeAgent({ ...o, stageHost: jobStageHost });
}
