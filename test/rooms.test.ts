// The rooms of the source tree and their order: a module imports only from its own room
// or from rooms below it (README "Layout"). Reads the sources, not the build, so a
// type-only import counts too.

import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Lowest first. test/ may import from anywhere. */
export const ROOMS = [
  'base',
  'policies',
  'transport',
  'models',
  'stage',
  'checks',
  'actors',
  'compute',
  'job',
  'cli',
  'bench',
];

const ROOT = path.join(__dirname, '..', '..');
const IMPORT_RE = /(?:from\s+|import\s*\(\s*|require\(\s*|import\s+)['"](\.{1,2}\/[^'"]+)['"]/g;

function sources(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) return sources(rel);
    return e.name.endsWith('.ts') ? [rel] : [];
  });
}

/** Every import from a room above the importing module's room, as "file -> target". */
export function upwardImports(): string[] {
  const out: string[] = [];
  for (const room of ROOMS) {
    for (const file of sources(room)) {
      const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
      for (const m of text.matchAll(IMPORT_RE)) {
        const target = path.normalize(path.join(path.dirname(file), m[1]));
        const targetRoom = ROOMS.indexOf(target.split(path.sep)[0]);
        if (targetRoom > ROOMS.indexOf(room)) out.push(`${file} -> ${target}`);
      }
    }
  }
  return out;
}

describe('the rooms of the source tree', () => {
  it('are the top-level folders that hold sources, every one of them in the order', () => {
    const withSources = fs
      .readdirSync(ROOT, { withFileTypes: true })
      .filter((e) => e.isDirectory() && !['node_modules', 'dist', 'test', 'out', '.git'].includes(e.name))
      .filter((e) => sources(e.name).length > 0)
      .map((e) => e.name);
    assert.deepEqual(withSources.sort(), [...ROOMS].sort());
  });

  it('import nothing from a room above their own', () => {
    assert.deepEqual(upwardImports(), []);
  });
});
