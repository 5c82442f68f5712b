// The flags and environment variables that say how a command reaches NATS: the server URL
// (--nats; BATON_NATS_URL, else NATS_URL) and the files a connection uses besides it
// (transport/nats-access.ts): --tls-ca, --tls-cert, --tls-key, --creds, or the same from
// BATON_NATS_TLS_CA … BATON_NATS_CREDS, else the nats CLI's NATS_CA, NATS_CERT, NATS_KEY,
// NATS_CREDS. Every value is a URL or a path: a secret is in a file, never on a command line.

import { natsUrlProblem } from '../transport/nats-url';
import { AccessNames, NatsAccess, accessOptions } from '../transport/nats-access';
import { FlagSpec, ParsedFlags, UsageError } from './args';
import { SWAP_DEFAULTS } from '../job/defaults';

/** How every command's --nats help spells the value (transport/nats-url.ts parses it). */
export const NATS_URL_FORMS =
  'host:port, nats://[user:password@|token@]host:port or tls://…, comma-separated for several servers';

/** Where `baton run` hands its stage processes the server URL: not on their command lines, which `ps` shows to every user. */
export const NATS_URL_ENV = 'BATON_NATS_URL';

/** The --nats value of `command` (or what `source` names), refused as a usage error when it does not parse. */
export function natsFlag(value: unknown, command: string, source = '--nats'): string {
  const raw = String(value);
  const problem = natsUrlProblem(raw);
  if (problem) throw new UsageError(`${command}: ${source} ${problem}`);
  return raw;
}

/** The environment variables a NATS URL is read from when no --nats is given, first found first. */
export const NATS_URL_ENVS = [NATS_URL_ENV, 'NATS_URL'] as const;

/** The server of `--nats`, else of BATON_NATS_URL, else of NATS_URL (the environment keeps a password off the command line); undefined when none is set. */
export function natsUrlOf(flag: unknown, command: string): string | undefined {
  if (flag !== undefined) return natsFlag(flag, command);
  for (const name of NATS_URL_ENVS) {
    const v = process.env[name];
    if (v !== undefined && v !== '') return natsFlag(v, command, name);
  }
  return undefined;
}

/** What each access file is, for its flag's help. */
const ACCESS_HELP: Record<keyof NatsAccess, string> = {
  tlsCa: "PEM file of the CA that signed a tls:// server's certificate (default: the system's CAs)",
  tlsCert: 'PEM client certificate, for a TLS server that verifies clients (with --tls-key)',
  tlsKey: "the client certificate's PEM private key (mode 600)",
  creds: 'credentials file (mode 600): a NATS .creds file, an nkey seed, or one line user:password',
};

const ACCESS_KEYS = Object.keys(ACCESS_HELP) as (keyof NatsAccess)[];

/** Each access file's flag (tlsCa: tls-ca) and environment variables, first found first: BATON_NATS_
 * and the flag (BATON_NATS_TLS_CA), else the nats CLI's name, NATS_ and the flag's last word (NATS_CA). */
const ACCESS_SOURCES = Object.fromEntries(
  ACCESS_KEYS.map((k) => {
    const flag = k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
    const words = flag.toUpperCase().split('-');
    const envs = [`BATON_NATS_${words.join('_')}`, `NATS_${words[words.length - 1]}`] as const;
    return [k, { flag, envs, help: ACCESS_HELP[k] }];
  }),
) as Record<keyof NatsAccess, { flag: string; envs: readonly [string, string]; help: string }>;

const camel = (flag: string) => flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

/** --tls-ca, --tls-cert, --tls-key and --creds, for every command that connects to NATS. */
export const NATS_ACCESS_FLAGS: readonly FlagSpec[] = ACCESS_KEYS.map((k) => ({
  name: ACCESS_SOURCES[k].flag,
  type: 'string',
  metavar: 'FILE',
  help: `${ACCESS_SOURCES[k].help}; or ${ACCESS_SOURCES[k].envs.join(', else ')} in the environment`,
}));

/** --job, --nats (default the local server) and the access files, of the commands that talk to a running job. */
export const RUNNING_JOB_FLAGS: readonly FlagSpec[] = [
  { name: 'job', type: 'string', metavar: 'J', help: 'the running job' },
  {
    name: 'nats',
    type: 'string',
    metavar: 'URL',
    help: `the job's NATS server: ${NATS_URL_FORMS}`,
    default: SWAP_DEFAULTS.natsUrl,
  },
  ...NATS_ACCESS_FLAGS,
];

/** The access files of a connection and what its messages call each (the flag or variable it came from). */
export interface ResolvedAccess {
  access: NatsAccess;
  names: AccessNames;
}

/**
 * The access files for a connection to `url` (undefined: a server this command starts itself,
 * which takes none: then a flag is refused and the environment not read), checked now, so a
 * missing file or a TLS file for a nats:// server is a usage error before anything starts.
 */
export function natsAccessOf(flags: ParsedFlags, command: string, url: string | undefined): ResolvedAccess {
  const access: NatsAccess = {};
  const names = {} as AccessNames;
  for (const k of ACCESS_KEYS) {
    const { flag, envs } = ACCESS_SOURCES[k];
    const given = flags[camel(flag)];
    names[k] = `--${flag}`;
    if (given !== undefined) {
      if (url === undefined)
        throw new UsageError(`${command}: --${flag} is for a server given with --nats (or ${NATS_URL_ENV})`);
      access[k] = String(given);
      continue;
    }
    if (url === undefined) continue;
    const env = envs.find((e) => (process.env[e] ?? '') !== '');
    if (env !== undefined) [access[k], names[k]] = [process.env[env] as string, env];
  }
  if (url !== undefined) {
    try {
      accessOptions(url, access, names);
    } catch (err) {
      throw new UsageError(`${command}: ${(err as Error).message}`, { cause: err });
    }
  }
  return { access, names };
}

/**
 * The environment of a process this one starts, for `url` and `access`: the URL and each file
 * (as an absolute path) in the BATON_ variables, every other variable of these names removed,
 * so the child connects as this process does, with nothing on its command line.
 */
export function natsAccessEnv(
  env: NodeJS.ProcessEnv,
  url: string | undefined,
  access: NatsAccess,
  resolve: (p: string) => string,
): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...env };
  // Without a URL (it goes another way, e.g. down a stdin pipe) none is left in the environment.
  for (const e of NATS_URL_ENVS) delete out[e];
  if (url !== undefined) out[NATS_URL_ENV] = url;
  for (const k of ACCESS_KEYS) {
    for (const e of ACCESS_SOURCES[k].envs) delete out[e];
    const path = access[k];
    if (path !== undefined) out[ACCESS_SOURCES[k].envs[0]] = resolve(path);
  }
  return out;
}
