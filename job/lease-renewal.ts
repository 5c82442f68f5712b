// The renewals of a launch's lease on its nodes (job/distributed-launch.ts): every quarter
// lease each node is asked to renew it, and a node that answered nothing for a whole lease
// (its renewals included) is gone or hung; it would have dropped the job's stages by now anyway.

import { JobError } from './job-errors';

export interface LeaseRenewal {
  readonly used: readonly string[];
  readonly job: string;
  readonly launch: string;
  readonly leaseMs: number;
  /** When each node was last heard from (Date.now()); one not heard from yet counts from now. */
  readonly heard: ReadonlyMap<string, number>;
  readonly request: (node: string, body: Record<string, unknown>) => void;
  readonly fail: (e: Error) => void;
}

/** Starts the renewals; clearInterval on the timer ends them. */
export function renewLeases(r: LeaseRenewal): NodeJS.Timeout {
  const { used, leaseMs } = r;
  const since = Date.now();
  return setInterval(() => {
    used.forEach((n) => r.request(n, { verb: 'renew', job: r.job, launch: r.launch }));
    const silent = used.filter((n) => Date.now() - (r.heard.get(n) ?? since) > leaseMs);
    if (silent.length > 0)
      r.fail(new JobError(`node(s) ${silent.join(', ')} answered nothing for ${leaseMs} ms: gone or hung`));
  }, leaseMs / 4);
}
