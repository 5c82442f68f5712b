// Bus over NATS (@nats-io/transport-node). Bytes in, bytes out: the codec is the
// caller's business, as for LocalBus.
//
// Decisions:
// - A message over the server's max_payload (read from the connection's server info) goes
//   out in chunks that each subscription reassembles (chunking.ts); one over the codec's
//   limit (64 MiB) is refused: publish() throws PayloadTooLargeError (size and limit in it).
//   A bad or incomplete chunked message is counted (`chunkRejections`) and reported.
// - Transport trouble never throws out of publish(): a publish on a closed or broken
//   connection is counted (`publishErrors`) and reported to `onError`; one the server's
//   permissions refuse comes later, counted (`denials.count`) and told to watchDenials too.
// - A handler exception inside a NATS callback silently kills the connection in
//   nats.js, so every callback is wrapped: the exception is counted (`errors`) and
//   reported, and the connection lives on.
// - publish() hands `data` to nats.js, which writes it out on a later microtask: do not
//   mutate it after publishing; publishParts() is done with its parts when it returns.
//   A received message is a view into the client's read buffer: decode or copy it at once.
// - written() waits until the client's socket has handed everything published so far
//   to the kernel (nats-socket.ts); where it cannot tell, a flush() round trip.
// - close() first waits, at most CLOSE_FLUSH_MS, for a flush: what was published before it
//   reaches the server unless the connection is down (then it closes at once) or the server
//   does not answer.
// - NATS core is at-most-once: a subscriber that falls more than the server's
//   max_pending behind is cut off and messages are lost (seen here as `disconnects`).
//
// Connecting (nats-connect.ts): a user and password or a token in the URL (nats-url.ts), or
// a credentials file; TLS to tls:// servers with the files of nats-access.ts.
// A seal (auth-bus.ts) travels in a header beside the payload (nats-seal-header.ts).
// Not modelled: queue groups, request/reply, JetStream.

import type { NatsConnection, Subscription as NatsSubscription } from '@nats-io/transport-node';
import type { Bus, BusHandler, PermissionDenial, Subscription } from './bus';
import { checkSubject } from './local-bus';
import { redactNatsUrl } from './nats-url';
import { openConnection } from './nats-connect';
import type { NatsBusOptions } from './nats-bus-options';
import { DEFAULT_MAX_MESSAGE_BYTES, joinParts } from './codec';
import { sendParts } from './nats-publish-parts';
import { NatsChunking } from './nats-chunks';
import { LinkState } from './nats-link';
import { headerBytes, readSeal, sealHeader } from './nats-seal-header';
import { clientSocket, socketDrained } from './nats-socket';
import { NatsBusError, PayloadTooLargeError, errorText } from './nats-bus-errors';
import { DenialWatch } from './nats-denials';

export { NatsBusError, PayloadTooLargeError } from './nats-bus-errors';
export { SEAL_HEADER } from './nats-seal-header';
export { NatsTlsError } from './nats-connect';
export type { NatsBusOptions } from './nats-bus-options';

/** How long close() waits for a server that does not answer before it drops what is unsent. */
const CLOSE_FLUSH_MS = 5000;

export class NatsBus implements Bus {
  readonly kind = 'nats';
  /** Handler exceptions caught. */
  errors = 0;
  /** Publishes that failed in the transport (closed or broken connection). */
  publishErrors = 0;
  /** Other transport trouble: subscription errors, server errors, failed unsubscribes. */
  transportErrors = 0;
  msgsOut = 0;
  bytesOut = 0;
  msgsIn = 0;
  bytesIn = 0;
  disconnects = 0;
  readonly denials = new DenialWatch((e, subject) => this.report(e, subject));
  readonly watchDenials = (on: (d: PermissionDenial) => void): void => this.denials.watch(on);
  private readonly chunking = new NatsChunking(this.maxMessageBytes, (r) => this.report(r, r.subject));
  onError: ((err: unknown, subject: string) => void) | undefined;
  onReconnect: (() => void) | undefined;
  onDisconnect: ((why: Error) => void) | undefined;
  /** Commands sent to the server (publishes, subscribes, unsubscribes), and how many a completed flush covers. */
  private commands = 0;
  private flushedUpTo = 0;

  private readonly link: LinkState;

  /** The server list with credentials masked: what messages show. */
  readonly url: string;

  private constructor(
    readonly connection: NatsConnection,
    url: string,
    opts: NatsBusOptions,
  ) {
    this.url = redactNatsUrl(url);
    this.onError = opts.onError;
    this.onReconnect = opts.onReconnect;
    this.onDisconnect = opts.onDisconnect;
    this.link = new LinkState(this.url, connection, {
      dropped: (why) => {
        this.disconnects++;
        this.onDisconnect?.(why);
      },
      back: () => this.onReconnect?.(),
      error: (e) => {
        this.transportErrors++;
        this.report(e, this.denials.take(e)?.subject ?? '');
      },
      hookFailed: (e) => this.report(e, ''),
    });
    void this.closed().then((e) =>
      this.link.closed(e ?? new NatsBusError(`the connection to NATS at ${this.url} closed`)),
    );
  }

  /** Resolves once the client is connected (at once when it is); rejects once it has closed for good, or when still down after `timeoutMs`. */
  up(timeoutMs: number): Promise<void> {
    return this.link.up(timeoutMs);
  }

  /** Connects to the servers of a --nats value (see nats-url.ts), with its credentials, TLS and access files. */
  static async connect(url: string, opts: NatsBusOptions = {}): Promise<NatsBus> {
    const nc = await openConnection(url, {
      name: opts.name ?? 'baton',
      timeoutMs: opts.timeoutMs ?? 5000,
      reconnect: opts.reconnect ?? true,
      access: opts.access,
      accessNames: opts.accessNames,
    });
    return new NatsBus(nc, url, opts);
  }

  /** Messages sent in chunks. */
  get chunkedOut(): number {
    return this.chunking.chunkedOut;
  }

  /** Chunk frames (or whole chunked messages) refused on receipt. */
  get chunkRejections(): number {
    return this.chunking.chunkRejections;
  }

  /** The server's max_payload for this connection, bytes. */
  get maxPayload(): number {
    return this.connection.info?.max_payload ?? 1024 * 1024;
  }

  /** The codec's limit: a message over the server's max_payload goes in chunks. */
  get maxMessageBytes(): number {
    return DEFAULT_MAX_MESSAGE_BYTES;
  }

  publish(subject: string, data: Uint8Array, seal?: Uint8Array): void {
    checkSubject(subject, false);
    if (data.byteLength > this.maxMessageBytes)
      throw new PayloadTooLargeError(subject, data.byteLength, this.maxMessageBytes);
    // max_payload counts the headers (the seal) too.
    const headers = seal === undefined ? undefined : sealHeader(seal);
    const frames = this.chunking.frames(data, this.maxPayload - (headers ? headerBytes(headers) : 0));
    try {
      for (const f of frames) this.connection.publish(subject, f, headers === undefined ? undefined : { headers });
      this.msgsOut++;
      this.commands += frames.length;
      this.bytesOut += data.byteLength;
    } catch (err) {
      this.publishErrors++;
      this.report(
        new NatsBusError(`publish to ${JSON.stringify(subject)} (${data.byteLength} bytes) failed: ${errorText(err)}`, {
          cause: err,
        }),
        subject,
      );
    }
  }

  /** Parts that fit in one NATS message go out with one copy (nats-publish-parts.ts); others joined, as publish(). */
  publishParts(subject: string, parts: readonly Uint8Array[], seal?: Uint8Array): void {
    checkSubject(subject, false);
    const size = parts.reduce((n, x) => n + x.byteLength, 0);
    const headers = seal === undefined ? undefined : sealHeader(seal);
    const fits = size <= this.maxPayload - (headers ? headerBytes(headers) : 0);
    let sent = false;
    try {
      sent = fits && sendParts(this.connection, subject, parts, headers);
    } catch (err) {
      this.publishErrors++;
      return this.report(new NatsBusError(`publish to ${JSON.stringify(subject)}: ${errorText(err)}`), subject);
    }
    if (!sent) return this.publish(subject, joinParts(parts), seal);
    [this.msgsOut, this.commands, this.bytesOut] = [this.msgsOut + 1, this.commands + 1, this.bytesOut + size];
  }

  subscribe(subject: string, handler: BusHandler): Subscription {
    checkSubject(subject, true);
    let sub: NatsSubscription;
    const chunks = this.chunking.receiver();
    try {
      this.commands++;
      sub = this.connection.subscribe(subject, {
        callback: (err, msg) => {
          // Nothing may escape this callback: a throw here kills the connection.
          try {
            if (err) {
              this.transportErrors++;
              this.report(
                new NatsBusError(`subscription ${JSON.stringify(subject)}: ${err.message}`, { cause: err }),
                subject,
              );
              return;
            }
            const data = chunks.accept(msg.subject, msg.data);
            if (!data) return;
            this.msgsIn++;
            this.bytesIn += data.byteLength;
            // Every chunk carries the whole message's seal; the one that completes it hands it on.
            const seal = readSeal(msg.headers);
            if (seal) handler(msg.subject, data, { seal });
            else handler(msg.subject, data);
          } catch (e) {
            this.errors++;
            this.report(e, msg?.subject ?? subject);
          }
        },
      });
    } catch (err) {
      throw new NatsBusError(`subscribe to ${JSON.stringify(subject)} failed: ${errorText(err)}`, { cause: err });
    }
    return {
      unsubscribe: () => {
        chunks.close();
        this.commands++;
        try {
          sub.unsubscribe();
        } catch (err) {
          this.transportErrors++;
          this.report(err, subject);
        }
      },
    };
  }

  /**
   * Round trip to the server: once it resolves, the server has processed every publish
   * and (un)subscription sent before. Skipped when nothing was sent since the last one began.
   */
  async flush(): Promise<void> {
    const upTo = this.commands;
    if (upTo === this.flushedUpTo) return;
    await this.connection.flush();
    if (upTo > this.flushedUpTo) this.flushedUpTo = upTo;
  }

  async written(): Promise<void> {
    // nats.js writes publishes out on a microtask; let that happen first.
    await Promise.resolve();
    const socket = clientSocket(this.connection);
    return socket ? socketDrained(socket) : this.flush();
  }

  /** Resolves when the connection has closed for good: by close(), or because the client
   * gave up reconnecting (then with the error, when nats.js gives one). */
  async closed(): Promise<Error | undefined> {
    const err = await this.connection.closed();
    return err instanceof Error ? err : undefined;
  }

  /** Resolves with why the connection is gone once it has closed for good. */
  async lost(): Promise<Error> {
    return (await this.closed()) ?? new NatsBusError('connection closed');
  }

  /**
   * Resolves the first time the connection drops (even if the client then reconnects) or
   * closes: core NATS does not keep what was in flight, so a job on this bus has lost
   * messages by then. `onReconnect` hears of every recovery from a drop.
   */
  disconnected(): Promise<Error> {
    return this.link.firstDrop;
  }

  /**
   * Closes the connection once the server has everything published before (a flush), or
   * after CLOSE_FLUSH_MS without its answer: nats.js's own close() destroys the socket at
   * once, which drops the messages still queued in it (a few big ones are).
   */
  async close(): Promise<void> {
    this.chunking.stop();
    if (this.connection.isClosed()) return;
    // A connection that is down (reconnecting) has lost what it could not send: no wait.
    if (this.link.down) return this.connection.close();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_FLUSH_MS).unref()));
    await Promise.race([this.flush().catch(() => {}), late]);
    clearTimeout(timer);
    await this.connection.close();
  }

  private report(err: unknown, subject: string): void {
    if (!this.onError) return;
    try {
      this.onError(err, subject);
    } catch {
      /* the hook must not break delivery either */
    }
  }
}
