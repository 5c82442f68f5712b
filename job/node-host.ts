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
import { durationModelFor, loadTrainingBackend, planJob, wireStage } from './wire-stage';
import { DurationModel } from '../models/durations';
import { InputError } from '../base/errors';

/** A host request naming a file (policy module, profile) on an agent started without --allow-files. */
export class FilesNotAllowedError extends InputError {
  override name = 'FilesNotAllowedError';
}

/**
 * The files on the hosting machine a job config names: a policy module (run), a profile
 * file, a training corpus and, when resuming, a checkpoint directory (read).
 */
export function filesAJobNames(cfg: JobConfig): string[] {
  return [
    ...(typeof cfg.policy === 'string' && isModulePath(cfg.policy) ? [`policy module ${quoteValue(cfg.policy)}`] : []),
    ...(typeof cfg.profile === 'string' && isProfilePath(cfg.profile)
      ? [`profile file ${quoteValue(cfg.profile)}`]
      : []),
    ...(typeof cfg.train?.data === 'string' ? [`corpus file ${quoteValue(cfg.train.data)}`] : []),
    // Stages read a checkpoint only to resume (the launcher writes them).
    ...(typeof cfg.train?.checkpoint === 'string' && cfg.train.startIteration > 0
      ? [`checkpoint directory ${quoteValue(cfg.train.checkpoint)}`]
      : []),
  ];
}

/** Files a launcher names are used on this machine only with --allow-files. */
function refuseFiles(cfg: JobConfig): void {
  const files = filesAJobNames(cfg);
  if (files.length > 0)
    throw new FilesNotAllowedError(
      `host: the job names ${files.join(' and ')}; this agent loads files a launcher names only when started with baton node --allow-files`,
    );
}

/** A host request's config as a node agent's plan. */
export const jobStageHost: StageHost = (config, o) => {
  const cfg: JobConfig = resolveConfig(checkConfigShape(config));
  if (!o.allowFiles) refuseFiles(cfg);
  const plan = planJob(cfg);
  let durations: DurationModel | null = null;
  const durationsOf = () => (durations ??= durationModelFor(cfg, plan.shape));
  return {
    job: cfg.job,
    stages: plan.shape.stages,
    check: () => void durationsOf(),
    prepare: async () => {
      if (cfg.train) await loadTrainingBackend(cfg.train);
    },
    wire: (w) => wireStage({ ...w, cfg, plan, durations: durationsOf() }),
    answerClaims: (bus, info) => answerJobClaims(bus, cfg.job, info),
  };
};

/** A node agent that hosts Baton jobs' stages. */
export function newNodeAgent(o: Omit<NodeAgentOptions, 'stageHost'>): NodeAgent {
  return new NodeAgent({ ...o, stageHost: jobStageHost });
}
