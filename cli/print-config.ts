// --print-config of sim, run and train: one shape for all three, the resolved job config
// and then where it runs (bus, processes, NATS server with its credentials hidden, clock).

import { JobConfig } from '../job/config';
import { redactNatsUrl } from '../transport/nats-url';

export interface PrintedSetup {
  readonly transport: 'nats' | 'local';
  readonly processes: 'per-stage' | 'single';
  readonly natsUrl?: string;
  readonly clock: 'real' | 'virtual';
}

/** The resolved config as --print-config shows it. */
export function configForPrint(cfg: JobConfig, setup: PrintedSetup): string {
  const where = {
    transport: setup.transport,
    processes: setup.processes,
    natsUrl: setup.natsUrl !== undefined ? redactNatsUrl(setup.natsUrl) : undefined,
    clock: setup.clock,
  };
  return JSON.stringify({ ...cfg, ...where }, null, 2);
}
