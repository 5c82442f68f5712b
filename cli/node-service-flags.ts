// The flags of `baton node` about its NATS service (--tag, --backend, --calibrate-ms) and
// the measuring and registering it does once it is ready, and again on SIGUSR2 (job/node-service.ts).

import { NODE_SERVICE_DEFAULTS } from '../job/defaults';
import { CAPABILITY_LIMITS, NODE_SERVICE_NAME } from '../actors/node-capabilities';
import { NodeHosting, NodeService } from '../job/node-service';
import { MeasureOptions, measureCapabilities } from '../job/node-measure';
import { parseRequirements } from '../job/node-require';
import type { NatsConnection } from '@nats-io/transport-node';
import { FlagSpec, UsageError, msFlag } from './args';

export const NODE_SERVICE_FLAGS: readonly FlagSpec[] = [
  {
    name: 'tag',
    type: 'list',
    metavar: 'K=V,…',
    help: 'user tags its service INFO carries (gpu=h200,rack=a), which a launcher can require (--require)',
  },
  {
    name: 'backend',
    type: 'string',
    metavar: 'NAME',
    help: 'the tfjs backend it calibrates on: tfjs-node-gpu, tfjs-node, wasm, cpu (default: the first that loads, or env BATON_BACKEND)',
  },
  {
    name: 'calibrate-ms',
    type: 'int',
    metavar: 'MS',
    help: 'time each calibration measurement (a matMul, a reference stage F+B) repeats for when it starts, after one unmeasured run',
    default: NODE_SERVICE_DEFAULTS.calibrateMs,
  },
];

/** The K=V pairs of a --tag or --require list (job/node-require.ts); a bad one is a usage error named by `what`. */
export function requirementsFlag(value: unknown, what: string): Record<string, string> {
  try {
    return parseRequirements((value as string[] | undefined) ?? [], what);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** --tag, --backend and --calibrate-ms, checked before anything connects. */
export function measureOptionsOf(flags: Record<string, unknown>): Omit<MeasureOptions, 'node'> {
  const budgetMs = msFlag(flags.calibrateMs, 'node', 'calibrate-ms');
  const tags = requirementsFlag(flags.tag, 'node: --tag');
  if (Object.keys(tags).length > CAPABILITY_LIMITS.tags)
    throw new UsageError(`node: --tag gives ${Object.keys(tags).length} tags; at most ${CAPABILITY_LIMITS.tags}`);
  const backend = flags.backend as string | undefined;
  return { tags, budgetMs, ...(backend !== undefined ? { backend } : {}) };
}

/** What an agent's service needs from `baton node`. */
export interface ServiceWiring {
  readonly connection: NatsConnection;
  readonly hosting: () => NodeHosting;
  readonly exited: Promise<void>;
  readonly measure: MeasureOptions;
  readonly registered: (id: string) => void;
  readonly log: (l: string) => void;
}

/**
 * Measures this node and registers its service, now and again on each SIGUSR2 (re-measured:
 * a new service id). Only the agent's own user (or root) can signal it, so no peer can make
 * it burn CPU. A failure is logged, and the agent goes on unlisted.
 */
export function serveAsService(w: ServiceWiring): void {
  const service = new NodeService(w.connection, w.hosting, w.log);
  let measuring: Promise<void> | null = null;
  const measure = () => {
    measuring ??= registerService(service, w.measure, w.registered, w.log).finally(() => (measuring = null));
  };
  const onSignal = () => {
    w.log(`node ${w.measure.node}: SIGUSR2: measuring its capabilities again`);
    measure();
  };
  process.on('SIGUSR2', onSignal);
  void w.exited.then(() => {
    process.off('SIGUSR2', onSignal);
    return service.stop();
  });
  measure();
}

/** Measures this node and registers its service; a failure is logged, and the agent goes on unlisted. */
async function registerService(
  service: NodeService,
  o: MeasureOptions,
  registered: (id: string) => void,
  log: (l: string) => void,
): Promise<void> {
  try {
    const caps = await measureCapabilities(o);
    await service.register(caps);
    registered(service.id ?? '?');
  } catch (err) {
    log(`node ${o.node}: not registered as NATS service ${NODE_SERVICE_NAME}: ${(err as Error).message}`);
  }
}
