import { strict as assert } from 'assert';
import type * as net from 'net';
import { freePorts, serverPorts } from '../transport/nats-server-ports';
// The module object itself (an `import *` is a copy with getters), so a test can replace createServer.

const netModule: { createServer: typeof net.createServer } = require('net');

describe('ports of a nats-server', function () {
  this.timeout(20_000);

  it('picks different free ports for the client, cluster and monitoring listeners (ports freed one after the other could be the same)', async function () {
    this.timeout(120_000);
    for (let i = 0; i < 10_000; i++) {
      const { port, clusterPort, monitorPort } = await serverPorts({ cluster: true, monitor: true });
      assert.equal(
        new Set([port, clusterPort, monitorPort]).size,
        3,
        `ports ${port}, ${clusterPort}, ${monitorPort} (try ${i})`,
      );
    }
  });

  it('leaves no probe socket listening when one of them cannot listen', async () => {
    const made: net.Server[] = [];
    const real = netModule.createServer;
    netModule.createServer = ((...args: Parameters<typeof net.createServer>) => {
      const srv = real(...args);
      made.push(srv);
      // The first fails at once; the others bind a little later (as after a name lookup).
      const listen = srv.listen.bind(srv) as (...a: unknown[]) => net.Server;
      srv.listen = (
        made.length === 1
          ? () => {
              process.nextTick(() => srv.emit('error', new Error('EMFILE (simulated)')));
              return srv;
            }
          : (...a: unknown[]) => {
              setTimeout(() => listen(...a), 10);
              return srv;
            }
      ) as typeof srv.listen;
      return srv;
    }) as typeof net.createServer;
    try {
      await assert.rejects(freePorts(3), /EMFILE \(simulated\)/);
    } finally {
      netModule.createServer = real;
    }
    await new Promise((r) => setTimeout(r, 50));
    const listening = made.map((m) => m.listening);
    for (const m of made) if (m.listening) m.close(); // so a failure here does not keep mocha alive
    assert.equal(made.length, 3);
    assert.deepEqual(listening, [false, false, false]);
  });
});
