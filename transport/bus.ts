// The bus seam: where stage mailboxes publish and subscribe. Two implementations
// (in-process, NATS) behind this interface, one codec for both.

/**
 * What travels beside a message: its seal (auth-seal.ts) as a raw bus carries it, and, on
 * an AuthBus, the sender label of the seal it checked.
 */
export interface BusMeta {
  readonly seal?: Uint8Array;
  readonly sender?: string;
}

/** A decoded message on the bus. Payload maps are validated by the receiver. */
export type BusHandler = (subject: string, data: Uint8Array, meta?: BusMeta) => void;

/**
 * The transport refused this process a publish or a subscription its credentials do not
 * allow (NATS: `Permissions Violation for Publish to "subj"`, reported by the server
 * asynchronously, after publish() has returned): `message` is what the transport said.
 */
export interface PermissionDenial {
  readonly operation: 'publish' | 'subscription';
  readonly subject: string;
  readonly message: string;
}

export interface Subscription {
  unsubscribe(): void;
}

export interface Bus {
  /** Human-readable transport name ("local", "nats"). */
  readonly kind: string;
  /** The largest message publish() takes, bytes (for NATS: the server's max_payload, at most the codec's limit). */
  readonly maxMessageBytes: number;
  /** Send bytes (and a seal to carry beside them) to every subscriber of `subject`. Never throws for a slow or absent receiver. */
  publish(subject: string, data: Uint8Array, seal?: Uint8Array): void;
  /**
   * Where given: publish the message that is `parts` one after the other (codec.ts
   * encodeEnvelopeParts), copying each once into the transport; the parts may be reused once it returns.
   */
  publishParts?(subject: string, parts: readonly Uint8Array[], seal?: Uint8Array): void;
  /**
   * Deliver messages on `subject` (NATS wildcards `*` and `>` allowed) to `handler`.
   * A handler that throws is caught and counted by the bus; it never takes the bus down.
   */
  subscribe(subject: string, handler: BusHandler): Subscription;
  /** Resolves when every publish so far has reached the transport's far end (for NATS: the server, by a round trip). */
  flush(): Promise<void>;
  /**
   * Resolves when every publish so far has left this process (for NATS: written to the
   * socket, so the kernel delivers it even while this thread is busy). Cheaper than flush().
   */
  written(): Promise<void>;
  close(): Promise<void>;
  /**
   * Where the transport has permissions (NATS): `on` hears every refused publish or
   * subscription. A refusal is otherwise silent: the message is simply not delivered.
   */
  watchDenials?(on: (d: PermissionDenial) => void): void;
}
