// The --nats URL: nats.js takes a comma-separated list of servers, each `host:port` or
// `scheme://[user[:password]@]host[:port]`. Checked before connecting, so a typo is a
// usage error naming the entry rather than nats.js's bare "Invalid URL"; and shown with
// any credentials masked wherever Baton prints it.

const SCHEMES = new Set(['nats:', 'tls:']);

/** What is wrong with a --nats value, or null when every server in it parses. */
export function natsUrlProblem(raw: string): string | null {
  const entries = raw.split(',').map((s) => s.trim());
  if (raw.trim() === '' || entries.some((e) => e === '')) return 'it names no server (an empty entry)';
  for (const entry of entries) {
    const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(entry) ? entry : `nats://${entry}`;
    let u: URL;
    try {
      u = new URL(withScheme);
    } catch {
      return `${JSON.stringify(redactNatsUrl(entry))} is not a URL (expected nats://host:port)`;
    }
    if (!SCHEMES.has(u.protocol)) return `${JSON.stringify(redactNatsUrl(entry))}: the scheme must be nats:// or tls://`;
    if (u.hostname === '') return `${JSON.stringify(redactNatsUrl(entry))} names no host`;
    if ((u.pathname !== '' && u.pathname !== '/') || u.search !== '' || u.hash !== '') return `${JSON.stringify(redactNatsUrl(entry))}: a server URL has no path, query or fragment`;
  }
  return null;
}

/** The URL list with each entry's user and password (or token) replaced by ***. */
export function redactNatsUrl(raw: string): string {
  return raw.split(',').map((e) => e.replace(/^(\s*(?:[a-z][a-z0-9+.-]*:\/\/)?)[^@/]*@/i, '$1***@')).join(',');
}
