// The --nats URL: a comma-separated list of servers, each `host:port`,
// `nats://[user[:password]@]host[:port]` (a user without a password is a token) or the same
// with `tls://` (TLS to every server: one value does not mix plain and TLS). Checked before
// connecting, so a typo is a usage error naming the entry rather than nats.js's bare
// "Invalid URL"; split into the server list and the credentials nats.js takes as options
// (it ignores what a URL carries before its host); shown with credentials masked wherever
// Baton prints it. The TLS files and credential files are nats-access.ts's.

import { InputError } from '../base/errors';

export interface NatsTarget {
  /** host:port entries for nats.js's `servers`. */
  servers: string[];
  /** tls:// servers: the connection must be TLS. */
  tls: boolean;
  user?: string;
  pass?: string;
  token?: string;
}

const SCHEME_RE = /^[a-z][a-z0-9+.-]*:\/\//i;

/** Entry `i` (from 0) of `raw` as an error message may show it: by number alone when
 * credentials could be in it (they may hold commas, so an entry may be a piece of one). */
function shown(entry: string, i: number, raw: string): string {
  return raw.includes('@') ? `entry ${i + 1}` : JSON.stringify(entry);
}

/** A --nats value that names no usable server. */
export class NatsUrlError extends InputError {
  override name = 'NatsUrlError';
}

/** The servers and credentials of a --nats value; throws NatsUrlError naming what is wrong. */
export function parseNatsUrl(raw: string): NatsTarget {
  const entries = raw.split(',').map((s) => s.trim());
  // Messages name what is wrong first: natsFlag puts the flag's name before them.
  if (raw.trim() === '') throw new NatsUrlError(`${JSON.stringify(raw)} names no server`);
  const empty = entries.indexOf('');
  if (empty >= 0) throw new NatsUrlError(`entry ${empty + 1} is empty`);
  const target: NatsTarget = { servers: [], tls: false };
  let credentials: string | null = null;
  let plain = false;
  entries.forEach((entry, i) => {
    const scheme = SCHEME_RE.exec(entry)?.[0].toLowerCase();
    if (scheme !== undefined && scheme !== 'nats://' && scheme !== 'tls://')
      throw new NatsUrlError(`${shown(entry, i, raw)}: the scheme must be nats:// or tls://, not ${scheme}`);
    if (scheme === 'tls://') target.tls = true;
    else plain = true;
    if (target.tls && plain)
      throw new NatsUrlError(
        `${shown(entry, i, raw)}: the servers of one --nats value are all tls:// or none (a bare host:port is nats://)`,
      );
    let u: URL;
    try {
      u = new URL(scheme ? `nats://${entry.slice(scheme.length)}` : `nats://${entry}`);
    } catch {
      throw new NatsUrlError(`${shown(entry, i, raw)} is not a URL (expected nats://host:port)`);
    }
    if (u.hostname === '') throw new NatsUrlError(`${shown(entry, i, raw)} names no host`);
    if ((u.pathname !== '' && u.pathname !== '/') || u.search !== '' || u.hash !== '')
      throw new NatsUrlError(`${shown(entry, i, raw)}: a server URL has no path, query or fragment`);
    target.servers.push(u.port ? `${u.hostname}:${u.port}` : u.hostname);
    let user: string;
    let pass: string;
    try {
      user = decodeURIComponent(u.username);
      pass = decodeURIComponent(u.password);
    } catch {
      throw new NatsUrlError(
        `${shown(entry, i, raw)}: a % in the credentials must start an escape such as %25 (for %) or %40 (for @)`,
      );
    }
    if (user === '' && pass === '') return;
    const these = `${user}\u0000${pass}`;
    if (credentials !== null && credentials !== these)
      throw new NatsUrlError(`${shown(entry, i, raw)}: the servers of one --nats value must share their credentials`);
    credentials = these;
    if (pass === '') target.token = user;
    else Object.assign(target, { user, pass });
  });
  return target;
}

/** What is wrong with a --nats value, or null when it parses. */
export function natsUrlProblem(raw: string): string | null {
  try {
    parseNatsUrl(raw);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

/** The server list as Baton prints it: each server, with *** for credentials; a value that
 * does not parse and has an @ in it is *** altogether. */
export function redactNatsUrl(raw: string): string {
  let t: NatsTarget;
  try {
    t = parseNatsUrl(raw);
  } catch {
    return raw.includes('@') ? '***' : raw;
  }
  const login = t.user !== undefined || t.token !== undefined ? '***@' : '';
  return t.servers.map((s) => `${t.tls ? 'tls' : 'nats'}://${login}${s}`).join(',');
}
