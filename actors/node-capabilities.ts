// A node agent's capabilities as it publishes them in its NATS service INFO (the services
// API: `$SRV.INFO.baton-node`, job/node-service.ts registers it), and the check a reader
// applies to what comes back from the network: INFO metadata is a map of strings, so
// every number travels as a decimal string, and every user tag as `tag.<key>`.
//
// What arrives is untrusted (anyone on the server can answer under the service name):
// parseNodeInfo checks the whole answer with a schema (valibot) and gives either the
// capabilities or the reason it refused them. It never throws. A well-formed lie (a
// plausible speed that is not true) passes: capabilities are advisory, and a launcher
// still hosts only on an agent that answers its sealed requests.

import * as v from 'valibot';
import { quoteValue } from '../base/quote';
import { TOKEN_RE } from '../base/token';
import { MAX_NODE_NAME } from './node-protocol';

/** The name every Baton node agent registers its service under. */
export const NODE_SERVICE_NAME = 'baton-node';
/** The INFO response type of the NATS services API (micro v1). */
export const INFO_RESPONSE_TYPE = 'io.nats.micro.v1.info_response';

/** Bounds no real machine passes: a value outside them is nonsense, not a fast node. */
export const CAPABILITY_LIMITS = {
  gflops: 1e6,
  cores: 65_536,
  bytes: 2 ** 60,
  tags: 32,
  tagValue: 200,
} as const;

export interface NodeCapabilities {
  readonly node: string;
  readonly host: string;
  readonly pid: number;
  /** The tfjs backend it computes on, and each it tried before, `name:ok` or `name:failed`. */
  readonly backend: string;
  readonly backends_tried: readonly string[];
  /** GFLOP/s measured at start (or when re-measured): an n×n matMul and a reference stage's F+B. */
  readonly gflops_matmul: number;
  readonly gflops_stage: number;
  /** When those were measured (ISO time). */
  readonly measured_at: string;
  /** Cores the process may use (its CPU affinity), the machine's memory and the process's free heap, bytes. */
  readonly cores: number;
  readonly memory_bytes: number;
  readonly free_heap_bytes: number;
  readonly version: string;
  /** `baton node --tag k=v` pairs. */
  readonly tags: Readonly<Record<string, string>>;
}

const TAG_PREFIX = 'tag.';

/** The capabilities as INFO metadata: a flat map of strings. */
export function capabilitiesMetadata(c: NodeCapabilities): Record<string, string> {
  const m: Record<string, string> = {
    node: c.node,
    host: c.host,
    pid: String(c.pid),
    backend: c.backend,
    backends_tried: c.backends_tried.join(','),
    gflops_matmul: String(c.gflops_matmul),
    gflops_stage: String(c.gflops_stage),
    measured_at: c.measured_at,
    cores: String(c.cores),
    memory_bytes: String(c.memory_bytes),
    free_heap_bytes: String(c.free_heap_bytes),
    version: c.version,
  };
  for (const [k, val] of Object.entries(c.tags)) m[`${TAG_PREFIX}${k}`] = val;
  return m;
}

const DECIMAL = /^[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/;
const INTEGER = /^[0-9]{1,19}$/;
const text = (max: number) => v.pipe(v.string(), v.minLength(1), v.maxLength(max), v.regex(/^[\x21-\x7e]+$/));
const decimal = (min: number, max: number, what: string) =>
  v.pipe(
    v.string(),
    v.regex(DECIMAL, `${what} must be a non-negative decimal number`),
    v.transform(Number),
    v.number(),
    v.finite(),
    v.check((x) => x > min && x <= max, `${what} must be above ${min} and at most ${max}`),
  );
const integer = (min: number, max: number, what: string) =>
  v.pipe(
    v.string(),
    v.regex(INTEGER, `${what} must be a non-negative integer`),
    v.transform(Number),
    v.number(),
    v.check((x) => Number.isSafeInteger(x) && x >= min && x <= max, `${what} must be an integer from ${min} to ${max}`),
  );

const METADATA_SCHEMA = v.object({
  node: v.pipe(v.string(), v.regex(TOKEN_RE, 'node must be a node name'), v.maxLength(MAX_NODE_NAME)),
  host: text(255),
  pid: integer(1, 2 ** 31, 'pid'),
  backend: text(40),
  backends_tried: v.pipe(
    v.string(),
    v.maxLength(400),
    v.regex(/^([a-z0-9-]+:(ok|failed))(,[a-z0-9-]+:(ok|failed))*$/, 'backends_tried must be name:ok|failed,…'),
  ),
  gflops_matmul: decimal(0, CAPABILITY_LIMITS.gflops, 'gflops_matmul'),
  gflops_stage: decimal(0, CAPABILITY_LIMITS.gflops, 'gflops_stage'),
  measured_at: v.pipe(v.string(), v.isoTimestamp('measured_at must be an ISO time')),
  cores: integer(1, CAPABILITY_LIMITS.cores, 'cores'),
  memory_bytes: integer(1, CAPABILITY_LIMITS.bytes, 'memory_bytes'),
  free_heap_bytes: integer(0, CAPABILITY_LIMITS.bytes, 'free_heap_bytes'),
  version: text(64),
});

const INFO_SCHEMA = v.looseObject({
  type: v.literal(INFO_RESPONSE_TYPE),
  name: v.literal(NODE_SERVICE_NAME),
  id: text(64),
  version: text(64),
  metadata: v.record(v.string(), v.string()),
});

/** What one INFO answer gave: the node's capabilities with its service id, or why it was refused. */
export type NodeInfoResult =
  | { readonly ok: true; readonly id: string; readonly capabilities: NodeCapabilities }
  | { readonly ok: false; readonly reason: string };

function issueText(issues: readonly v.BaseIssue<unknown>[], where: string): string {
  const i = issues[0];
  const path = v.getDotPath(i);
  return `${where}${path ? `.${path}` : ''}: ${i.message} (got ${quoteValue(i.input, 60)})`;
}

/** User tags from `tag.<key>` metadata entries, checked. */
function tagsOf(metadata: Record<string, string>): Record<string, string> | string {
  const tags: Record<string, string> = {};
  const keys = Object.keys(metadata).filter((k) => k.startsWith(TAG_PREFIX));
  if (keys.length > CAPABILITY_LIMITS.tags) return `${keys.length} tags, over ${CAPABILITY_LIMITS.tags}`;
  for (const k of keys) {
    const name = k.slice(TAG_PREFIX.length);
    const val = metadata[k];
    if (!TOKEN_RE.test(name)) return `tag ${quoteValue(name, 60)} is not a token ([A-Za-z0-9_-]+)`;
    if (!checkTagValue(val))
      return `tag ${name}'s value ${quoteValue(val, 60)} is not 1-${CAPABILITY_LIMITS.tagValue} printable characters`;
    tags[name] = val;
  }
  return tags;
}

export function checkTagValue(val: string): boolean {
  return val.length >= 1 && val.length <= CAPABILITY_LIMITS.tagValue && /^[\x21-\x7e]+$/.test(val);
}

/** One `$SRV.INFO` answer (already JSON-decoded), checked; never throws. */
export function parseNodeInfo(answer: unknown): NodeInfoResult {
  const info = v.safeParse(INFO_SCHEMA, answer);
  if (!info.success) return { ok: false, reason: issueText(info.issues, 'info') };
  const meta = v.safeParse(METADATA_SCHEMA, info.output.metadata);
  if (!meta.success) return { ok: false, reason: issueText(meta.issues, 'info.metadata') };
  const tags = tagsOf(info.output.metadata);
  if (typeof tags === 'string') return { ok: false, reason: `info.metadata: ${tags}` };
  const m = meta.output;
  return {
    ok: true,
    id: info.output.id,
    capabilities: { ...m, backends_tried: m.backends_tried.split(','), tags },
  };
}
