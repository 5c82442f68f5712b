// Run a benchmark's measurement in a child process and read the JSON it prints.

import { spawn } from 'child_process';

/** Resolves with the child's stdout parsed as JSON; rejects with `what` and its stderr when it fails. */
export function childJson(cmd: string, args: readonly string[], what: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`${what} exited with ${code}: ${err.trim()}`));
      try {
        resolve(JSON.parse(out));
      } catch (e) {
        reject(new Error(`${what} printed no JSON: ${(e as Error).message}`));
      }
    });
  });
}
