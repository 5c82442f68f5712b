import { JobConfig, resolveConfig } from '../job/config';

/** A job of `bf` on the uniform profile, P stages and M microbatches, with whatever else `extra` sets. */
export function bfUniform(
  job: string,
  stages: number,
  microbatches: number,
  extra: Partial<JobConfig> = {},
): JobConfig {
  return resolveConfig({ job, stages, microbatches, policy: 'bf', profile: 'uniform', ...extra });
}
