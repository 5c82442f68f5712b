// One "machine" of test/netns.test.ts, run inside its network namespace (ip netns exec):
// a nats-server whose cluster listener is on the namespace's own address (routes to the
// other machines' servers), and `baton node` agents on it. Prints one JSON line once the
// server and the agents are up ({url, server_pid, agents}), another once the server has
// its routes ({routed: true}); on SIGTERM, or when its stdin closes, stops the agents and
// the server and exits.
//
// argv: JSON {name, clusterHost, clusterPort, routes, agents, keyFile, expectRoutes}.

import { startNatsServer } from '../transport/nats-server';
import { AgentProcess, startAgent } from '../bench/agent-process';

interface MachineSpec {
  name: string;
  clusterHost: string;
  clusterPort: number;
  routes: string[];
  agents: string[];
  keyFile: string;
  /** Routes to wait for: one to every other machine's server. */
  expectRoutes: number;
}

async function machine(spec: MachineSpec): Promise<void> {
  const server = await startNatsServer({
    name: spec.name,
    cluster: true,
    clusterHost: spec.clusterHost,
    clusterPort: spec.clusterPort,
    routes: spec.routes,
    monitor: true,
  });
  const agents: AgentProcess[] = [];
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    for (const a of agents) await a.stop();
    await server.stop();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.stdin.on('end', () => void stop());
  process.stdin.resume();
  for (const name of spec.agents)
    agents.push(await startAgent((c, a) => [c, [...a]], { url: server.url, keyFile: spec.keyFile, name }));
  console.log(JSON.stringify({ url: server.url, server_pid: server.pid, agents: agents.map((a) => a.pid) }));
  await server.waitForRoutes(spec.expectRoutes, 60_000);
  console.log(JSON.stringify({ routed: true }));
}

machine(JSON.parse(process.argv[2]) as MachineSpec).catch((e: Error) => {
  process.stderr.write(`netns machine: ${e.message}\n`);
  process.exit(1);
});
