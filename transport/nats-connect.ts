// Opening a nats.js connection for NatsBus: the servers, TLS and credentials of a --nats
// value and its access files (nats-access.ts), and errors that say what went wrong.
//
// A nats:// URL means plain text. nats.js itself would upgrade to TLS when the server
// requires it, so a nats:// URL to a TLS server fails (or succeeds) for reasons the URL does
// not show; here it is refused instead, with NatsTlsError naming the tls:// URL to give. When
// a plain connection fails, the server's greeting (its INFO line, sent before any
// credentials) is read once to tell a TLS server from an absent one.

import { createConnection } from 'net';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { InputError } from '../base/errors';
import { AccessNames, NatsAccess, accessOptions } from './nats-access';
import { redactNatsUrl } from './nats-url';
import { NatsBusError, errorText } from './nats-bus-errors';

/** A nats:// URL to a server that requires TLS. */
export class NatsTlsError extends InputError {
  override name = 'NatsTlsError';
}

export interface ConnectSettings {
  name: string;
  timeoutMs: number;
  reconnect: boolean;
  access?: NatsAccess;
  /** How messages name the access files (flags, environment variables). */
  accessNames?: AccessNames;
}

/**
 * How a dropped client dials again: every 250 ms (nats.js waits 2 s) for about a minute. A
 * job that lost its server replays the iteration once every process is back (job/recovery.ts),
 * so a restarted server should be found within a fraction of a second, not seconds.
 */
export const RECONNECT = { waitMs: 250, jitterMs: 100, attempts: 240 } as const;

/** How long reading a server's greeting may take, ms. */
const GREETING_MS = 2000;

/** Whether the server at `hostPort` says it requires TLS in its greeting; false when it cannot be read. */
export function serverRequiresTls(hostPort: string, timeoutMs = GREETING_MS): Promise<boolean> {
  const at = hostPort.lastIndexOf(':');
  const host = at > 0 ? hostPort.slice(0, at).replace(/^\[|\]$/g, '') : hostPort;
  const port = at > 0 ? Number(hostPort.slice(at + 1)) : 4222;
  return new Promise((resolve) => {
    let text = '';
    const socket = createConnection({ host, port });
    const done = (required: boolean) => {
      socket.destroy();
      clearTimeout(timer);
      resolve(required);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.on('error', () => done(false));
    socket.on('close', () => done(false));
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      const end = text.indexOf('\r\n');
      if (end < 0 && text.length < 65536) return;
      const m = /^INFO\s+(\{.*\})/.exec(text.slice(0, end < 0 ? text.length : end));
      try {
        done(m !== null && (JSON.parse(m[1]) as { tls_required?: unknown }).tls_required === true);
      } catch {
        done(false);
      }
    });
  });
}

function tlsRefusal(url: string, servers: readonly string[]): NatsTlsError {
  return new NatsTlsError(
    `the NATS server at ${redactNatsUrl(url)} requires TLS, and a nats:// URL is plain text: give it as ` +
      `${servers.map((s) => `tls://${s}`).join(',')} (with --tls-ca FILE when a private CA signed its certificate)`,
  );
}

/** A hint for a TLS failure that a missing or wrong CA explains. */
function tlsHint(err: unknown): string {
  const code = (err as { code?: unknown })?.code ?? (err as { cause?: { code?: unknown } })?.cause?.code;
  return typeof code === 'string' && /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ALTNAME/.test(code)
    ? " (is --tls-ca the CA that signed the server's certificate?)"
    : '';
}

/** A connection to the servers of `url`; throws NatsAccessError/NatsUrlError (bad input), NatsTlsError or NatsBusError. */
export async function openConnection(url: string, s: ConnectSettings): Promise<NatsConnection> {
  const o = accessOptions(url, s.access, s.accessNames);
  let nc: NatsConnection;
  try {
    nc = await connect({
      ...o,
      name: s.name,
      timeout: s.timeoutMs,
      reconnect: s.reconnect,
      reconnectTimeWait: RECONNECT.waitMs,
      reconnectJitter: RECONNECT.jitterMs,
      maxReconnectAttempts: RECONNECT.attempts,
    });
  } catch (err) {
    if (!o.tls && (await Promise.all(o.servers.map((x) => serverRequiresTls(x)))).some(Boolean))
      throw tlsRefusal(url, o.servers);
    const hint = o.tls ? tlsHint(err) : '';
    throw new NatsBusError(`cannot connect to NATS at ${redactNatsUrl(url)}: ${errorText(err)}${hint}`, { cause: err });
  }
  if (!o.tls && nc.info?.tls_required === true) {
    await nc.close().catch(() => {});
    throw tlsRefusal(url, o.servers);
  }
  return nc;
}
