// How a process gets onto a NATS server beyond its URL (nats-url.ts): the TLS files of a
// tls:// server (the CA that signs the server's certificate, and a client certificate and
// key when the server asks for one) and a credentials file. Every file is read here, before
// connecting, so a missing or unreadable one is an error naming it rather than a failed
// handshake; a private key or credentials file that group or others may read is refused
// (as ssh refuses such a key). A credentials file holds one of:
//   - a NATS credentials file (a user JWT and its nkey seed, as `nsc` writes them),
//   - an nkey seed (one line starting `SU`, for a server that lists the user's public nkey),
//   - `user:password` on one line (the first colon splits; nothing is percent-decoded).
// Not modelled: handshake-first TLS, a CA or key given inline, a password typed at a prompt.

import { readFileSync, statSync } from 'fs';
import { credsAuthenticator, nkeyAuthenticator, usernamePasswordAuthenticator } from '@nats-io/transport-node';
import type { Authenticator, TlsOptions } from '@nats-io/transport-node';
import { InputError } from '../base/errors';
import { parseNatsUrl } from './nats-url';

/** The files a connection uses besides its URL; each a path, never a secret itself. */
export interface NatsAccess {
  /** PEM file of the CA certificate(s) a tls:// server's certificate must chain to; default the system's CAs. */
  tlsCa?: string;
  /** PEM client certificate, for a server that verifies clients; needs tlsKey. */
  tlsCert?: string;
  /** PEM private key of tlsCert (readable by its owner only). */
  tlsKey?: string;
  /** Credentials file (see the header; readable by its owner only). */
  creds?: string;
}

/** What a caller names each file by in messages (a flag, an environment variable). */
export type AccessNames = Record<keyof NatsAccess, string>;

const DEFAULT_NAMES: AccessNames = {
  tlsCa: 'TLS CA file',
  tlsCert: 'TLS certificate',
  tlsKey: 'TLS key',
  creds: 'credentials file',
};

/** A TLS or credentials file that cannot be used, or one given where it does not apply. */
export class NatsAccessError extends InputError {
  override name = 'NatsAccessError';
}

/** The options nats.js's connect() takes for `url` and `access`: servers, TLS, credentials. */
export interface AccessOptions {
  servers: string[];
  tls?: TlsOptions;
  user?: string;
  pass?: string;
  token?: string;
  authenticator?: Authenticator;
}

/**
 * The text of the file at `path`, named `what` in the errors `fail` makes: one that cannot be
 * read, and with `openNote` (what to say after the name), one that group or others may read.
 */
export function readPrivateFile(
  path: string,
  what: string,
  fail: (message: string) => Error,
  openNote?: string,
): string {
  let text: string;
  let mode: number;
  try {
    mode = statSync(path).mode;
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw fail(`${what} ${JSON.stringify(path)}: cannot read it (${(err as Error).message})`);
  }
  if (openNote !== undefined && (mode & 0o077) !== 0)
    throw fail(`${what} ${JSON.stringify(path)}${openNote} (mode ${(mode & 0o777).toString(8)}); chmod 600 it`);
  return text;
}

const readFile = (path: string, what: string, secret: boolean) =>
  readPrivateFile(path, what, (m) => new NatsAccessError(m), secret ? ' is readable by others' : undefined);

/** The authenticator a credentials file's text stands for (see the header). */
export function credsFileAuthenticator(text: string, shown: string): Authenticator {
  if (/-----BEGIN NATS USER JWT-----/.test(text)) return credsAuthenticator(new TextEncoder().encode(text));
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== '');
  if (lines.length === 1 && /^SU[A-Z2-7]{50,}$/.test(lines[0].trim()))
    return nkeyAuthenticator(new TextEncoder().encode(lines[0].trim()));
  const colon = lines.length === 1 ? lines[0].indexOf(':') : -1;
  if (colon > 0 && colon < lines[0].length - 1)
    return usernamePasswordAuthenticator(lines[0].slice(0, colon), lines[0].slice(colon + 1));
  throw new NatsAccessError(
    `${shown}: not a credentials file (a NATS .creds file, an nkey seed SU…, or one line user:password)`,
  );
}

/** nats.js's options for `url` with `access` (names: how messages call each file); throws NatsAccessError or NatsUrlError. */
export function accessOptions(url: string, access: NatsAccess = {}, names: AccessNames = DEFAULT_NAMES): AccessOptions {
  const { servers, tls, user, pass, token } = parseNatsUrl(url);
  const tlsFiles = (['tlsCa', 'tlsCert', 'tlsKey'] as const).filter((k) => access[k] !== undefined);
  if (!tls && tlsFiles.length > 0)
    throw new NatsAccessError(`${names[tlsFiles[0]]} is for a TLS server: give the server as tls://host:port`);
  if ((access.tlsCert === undefined) !== (access.tlsKey === undefined))
    throw new NatsAccessError(`${names.tlsCert} and ${names.tlsKey} go together: give both or neither`);
  const out: AccessOptions = { servers, user, pass, token };
  if (tls) {
    out.tls = {};
    if (access.tlsCa !== undefined) out.tls.ca = readFile(access.tlsCa, names.tlsCa, false);
    if (access.tlsCert !== undefined) out.tls.cert = readFile(access.tlsCert, names.tlsCert, false);
    if (access.tlsKey !== undefined) out.tls.key = readFile(access.tlsKey, names.tlsKey, true);
  }
  if (access.creds !== undefined) {
    if (user !== undefined || token !== undefined)
      throw new NatsAccessError(`${names.creds} and credentials in the URL: give one of them`);
    const shown = `${names.creds} ${JSON.stringify(access.creds)}`;
    out.authenticator = credsFileAuthenticator(readFile(access.creds, names.creds, true), shown);
  }
  return out;
}
