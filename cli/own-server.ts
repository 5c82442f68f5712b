// The nats-server a launcher starts for one job when it is given none (`baton run`, `baton
// train` without --nats): accounts-based, with a user of its own for the launcher, for
// each stage process (only the subjects its stages use: job/nats-users.ts) and for a
// `baton tap` of the job (read only), all with fresh passwords. A client without
// credentials is refused. The stage processes get their URL, credentials in it, on their
// stdin; the tap URL is in a file only this user can read, removed with the server.

import { mkdtempSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { NatsServerHandle, startNatsServer } from '../transport/nats-server';
import { onProcessEnd } from '../transport/process-cleanup';
import { NatsUser, newPassword, ownServerUsers } from '../job/nats-users';
import type { JobConfig } from '../job/config';

export interface OwnServer {
  readonly server: NatsServerHandle;
  /** The launcher's URL, with its credentials. */
  readonly launcherUrl: string;
  /** Each stage process's URL, with its credentials (none when the stages run in the launcher). */
  readonly stageUrls: string[];
  /** A file (mode 600) holding a URL that may watch the job (baton tap). */
  readonly tapUrlFile: string;
  stop(): Promise<void>;
}

/** `url` (nats://host:port) with `u`'s credentials in it. */
export function urlWithUser(url: string, u: Pick<NatsUser, 'user' | 'password'>): string {
  return url.replace('nats://', `nats://${encodeURIComponent(u.user)}:${encodeURIComponent(u.password)}@`);
}

/** Starts the server of `cfg`'s job, whose stage processes (if any) are named `stageNames`. */
export async function startOwnServer(
  cfg: Pick<JobConfig, 'job' | 'stages' | 'chunks' | 'tp' | 'dp'>,
  stageNames: readonly string[],
): Promise<OwnServer> {
  const { job } = cfg;
  const { launcher, stages } = ownServerUsers(cfg, stageNames);
  const tap: NatsUser = { user: 'tap', password: newPassword(), publish: [], subscribe: [`baton.${job}.>`] };
  const server = await startNatsServer({ users: [launcher, ...stages, tap] });
  let dir: string | undefined;
  const removeDir = () => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  };
  const forget = onProcessEnd(removeDir);
  try {
    dir = mkdtempSync(join(tmpdir(), 'baton-tap-'));
    const tapUrlFile = join(dir, 'nats-url');
    writeFileSync(tapUrlFile, `${urlWithUser(server.url, tap)}\n`, { mode: 0o600 });
    return {
      server,
      launcherUrl: urlWithUser(server.url, launcher),
      stageUrls: stages.map((u) => urlWithUser(server.url, u)),
      tapUrlFile,
      stop: async () => {
        await server.stop();
        removeDir();
        forget();
      },
    };
  } catch (err) {
    await server.stop();
    removeDir();
    forget();
    throw err;
  }
}
