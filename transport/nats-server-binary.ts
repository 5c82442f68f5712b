// Finding the nats-server binary, and the command that starts it so it dies with its
// parent (setpriv --pdeathsig where util-linux has it).

import { spawnSync } from 'child_process';
import { accessSync, constants, statSync } from 'fs';
import { delimiter, join } from 'path';
import { NatsServerError } from './nats-server-error';

/** Locate the nats-server binary, or throw telling how to install it. */
export function findNatsServer(explicit?: string): string {
  const candidates = explicit
    ? [explicit]
    : [
        ...(process.env.PATH ?? '')
          .split(delimiter)
          .filter(Boolean)
          .map((d) => join(d, 'nats-server')),
        '/usr/sbin/nats-server',
        '/usr/local/bin/nats-server',
        '/usr/bin/nats-server',
      ];
  for (const c of candidates) {
    try {
      accessSync(c, constants.X_OK);
      if (statSync(c).isFile()) return c;
    } catch {
      /* next */
    }
  }
  throw new NatsServerError(
    'missing-binary',
    `nats-server not found (looked at ${candidates.join(', ')}); install the Debian package: apt-get install nats-server`,
  );
}

/**
 * The server must not outlive the process that started it, even one killed with SIGKILL
 * (which runs no cleanup): where util-linux's setpriv is installed, the server is started
 * through it with a parent-death signal. Elsewhere it is started plainly.
 */
export function dieWithParent(binary: string, args: string[]): [string, string[]] {
  const setpriv = setprivWithPdeathsig();
  return setpriv ? [setpriv, ['--pdeathsig', 'SIGKILL', binary, ...args]] : [binary, args];
}

let setprivFound: string | null | undefined;

/** setpriv, if installed and new enough to know --pdeathsig (util-linux 2.33+); looked up once. */
function setprivWithPdeathsig(): string | null {
  if (setprivFound !== undefined) return setprivFound;
  setprivFound = null;
  for (const p of ['/usr/bin/setpriv', '/bin/setpriv']) {
    const r = spawnSync(p, ['--help'], { encoding: 'utf8', timeout: 2000 });
    if (r.status === 0 && /--pdeathsig/.test(r.stdout)) {
      setprivFound = p;
      break;
    }
  }
  return setprivFound;
}
