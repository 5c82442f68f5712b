// A node agent as a NATS service (the services API of @nats-io/services): `baton node`
// registers one under the name `baton-node`, so any NATS client finds the nodes of a
// system with `$SRV.PING.baton-node` / `$SRV.INFO.baton-node` / `$SRV.STATS.baton-node`.
// Its INFO metadata carries the node's capabilities (actors/node-capabilities.ts),
// measured when it registers; its STATS carry what it hosts now, as the data of its one
// endpoint, `hosting` (on `baton._nodes.<name>.hosting`, which answers the same as JSON).
//
// The service answers without seals: what it says is public and advisory. Nothing it
// receives changes the agent; the agent's own requests stay sealed (actors/node-agent.ts).
// Re-measuring re-registers the service (its metadata is fixed once registered), under a
// new service id.

import type { NatsConnection } from '@nats-io/transport-node';
import { Service, Svcm } from '@nats-io/services';
import { NODES_PREFIX } from '../actors/node-protocol';
import { NODE_SERVICE_NAME, NodeCapabilities, capabilitiesMetadata } from '../actors/node-capabilities';

/** Subject of a node's `hosting` endpoint. */
export const hostingSubject = (name: string) => `${NODES_PREFIX}.${name}.hosting`;

/** What a node hosts now, as its STATS and its hosting endpoint say. */
export interface NodeHosting {
  readonly jobs: readonly { readonly job: string; readonly stages: readonly number[] }[];
}

/** A registered node service: re-registered with new capabilities, or stopped. */
export class NodeService {
  private service: Service | null = null;

  constructor(
    private readonly nc: NatsConnection,
    private readonly hosting: () => NodeHosting,
    private readonly log: (line: string) => void,
  ) {}

  /** The service's id while registered. */
  get id(): string | null {
    return this.service?.info().id ?? null;
  }

  /** Registers (or re-registers) the service with these capabilities. */
  async register(c: NodeCapabilities): Promise<void> {
    await this.stop();
    // The services package has a nats-core of its own; the connection is the same protocol.
    const svcm = new Svcm(this.nc as unknown as ConstructorParameters<typeof Svcm>[0]);
    const service = await svcm.add({
      name: NODE_SERVICE_NAME,
      version: c.version,
      description: `Baton node agent ${c.node}`,
      metadata: capabilitiesMetadata(c),
      // Every node answers: no queue group.
      queue: '',
      statsHandler: () => Promise.resolve(this.hostingNow()),
    });
    service.addEndpoint('hosting', {
      subject: hostingSubject(c.node),
      handler: (err, msg) => {
        if (err) return;
        try {
          msg.respond(JSON.stringify(this.hostingNow()));
        } catch (e) {
          this.log(`node ${c.node}: could not answer a hosting request: ${(e as Error).message}`);
        }
      },
    });
    this.service = service;
  }

  private hostingNow(): NodeHosting {
    try {
      return this.hosting();
    } catch {
      return { jobs: [] };
    }
  }

  async stop(): Promise<void> {
    const s = this.service;
    this.service = null;
    if (s && !s.isStopped) await s.stop().catch(() => null);
  }
}
