// Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
// file descriptors 3 and 4, messages ended by a NUL byte). No dependency and no TCP port:
// the test talks to the one browser it started, and nothing else can reach it.

import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Readable, Writable } from 'stream';

/** Where Debian's chromium package puts the browser (scripts/test.sh installs it when missing). */
export const CHROMIUM_PATHS = ['/usr/bin/chromium', '/usr/bin/chromium-browser'];

export function findChromium(): string | null {
  return CHROMIUM_PATHS.find((p) => fs.existsSync(p)) ?? null;
}

type Message = {
  id?: number;
  method?: string;
  params?: Record<string, unknown>;
  result?: unknown;
  error?: unknown;
  sessionId?: string;
};

export interface PageVisit {
  /** Console errors, uncaught exceptions and error log entries, as text. */
  errors: string[];
  /** URLs the page asked for besides itself. */
  requests: string[];
  /** PNG of the whole page. */
  screenshot: Buffer;
  /** What `probe` evaluated to in the page. */
  probed: unknown;
}

class Cdp {
  private next = 1;
  private buf = '';
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  readonly listeners: ((m: Message) => void)[] = [];

  constructor(
    private readonly out: Writable,
    input: Readable,
  ) {
    input.on('data', (d: Buffer) => {
      this.buf += d.toString('utf8');
      let i: number;
      while ((i = this.buf.indexOf('\0')) >= 0) {
        const m = JSON.parse(this.buf.slice(0, i)) as Message;
        this.buf = this.buf.slice(i + 1);
        const w = m.id !== undefined ? this.waiting.get(m.id) : undefined;
        if (w) {
          this.waiting.delete(m.id!);
          if (m.error) w.reject(new Error(JSON.stringify(m.error)));
          else w.resolve(m.result);
        } else for (const l of this.listeners) l(m);
      }
    });
  }

  send<T = Record<string, unknown>>(method: string, params: object = {}, sessionId?: string): Promise<T> {
    const id = this.next++;
    this.out.write(`${JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) })}\0`);
    return new Promise<T>((resolve, reject) =>
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, reject }),
    );
  }
}

/** Opens `file` in a fresh headless Chromium, waits for its load, screenshots it whole and evaluates `probe`. */
export async function visitPage(chromium: string, file: string, probe: string, width = 1400): Promise<PageVisit> {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-chromium-'));
  const child: ChildProcess = spawn(
    chromium,
    [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-default-apps',
      '--disable-extensions',
      `--user-data-dir=${profile}`,
      '--remote-debugging-pipe',
      'about:blank',
    ],
    { stdio: ['ignore', 'ignore', 'ignore', 'pipe', 'pipe'] },
  );
  try {
    const cdp = new Cdp(child.stdio[3] as Writable, child.stdio[4] as Readable);
    const url = `file://${path.resolve(file)}`;
    const errors: string[] = [];
    const requests: string[] = [];
    let loaded: () => void = () => {};
    const load = new Promise<void>((resolve) => (loaded = resolve));
    cdp.listeners.push((m) => {
      const p = m.params ?? {};
      if (m.method === 'Runtime.consoleAPICalled' && p.type === 'error')
        errors.push(`console: ${JSON.stringify(p.args)}`);
      if (m.method === 'Runtime.exceptionThrown') errors.push(`exception: ${JSON.stringify(p.exceptionDetails)}`);
      if (m.method === 'Log.entryAdded' && (p.entry as { level?: string }).level === 'error')
        errors.push(`log: ${(p.entry as { text?: string }).text}`);
      if (m.method === 'Network.requestWillBeSent') {
        const u = (p.request as { url: string }).url;
        if (u !== url) requests.push(u);
      }
      if (m.method === 'Page.loadEventFired') loaded();
    });
    const { targetId } = await cdp.send<{ targetId: string }>('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await cdp.send<{ sessionId: string }>('Target.attachToTarget', { targetId, flatten: true });
    for (const domain of ['Runtime', 'Log', 'Network', 'Page']) await cdp.send(`${domain}.enable`, {}, sessionId);
    await cdp.send(
      'Emulation.setDeviceMetricsOverride',
      { width, height: 900, deviceScaleFactor: 1, mobile: false },
      sessionId,
    );
    await cdp.send('Page.navigate', { url }, sessionId);
    await load;
    const { result } = await cdp.send<{ result: { value: unknown } }>(
      'Runtime.evaluate',
      { expression: probe, returnByValue: true },
      sessionId,
    );
    const metrics = await cdp.send<{ cssContentSize: { width: number; height: number } }>(
      'Page.getLayoutMetrics',
      {},
      sessionId,
    );
    const size = metrics.cssContentSize;
    const { data } = await cdp.send<{ data: string }>(
      'Page.captureScreenshot',
      {
        format: 'png',
        captureBeyondViewport: true,
        clip: { x: 0, y: 0, width: Math.max(width, size.width), height: Math.min(size.height, 16000), scale: 1 },
      },
      sessionId,
    );
    const exited = new Promise((resolve) => child.once('exit', resolve));
    await cdp.send('Browser.close').catch(() => {});
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5000))]);
    return { errors, requests, screenshot: Buffer.from(data, 'base64'), probed: result.value };
  } finally {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    }
    // Its helper processes may still be writing the profile as the browser ends: retried.
    fs.rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  }
}
