#!/usr/bin/env node
// Builds Baton's optional native kernels (native/binding.gyp → native/build/Release/
// baton_native.node) with node-gyp, against the Node headers found on this machine and
// the system's OpenBLAS. Run by `npm ci`/`npm install` (the install script) and by
// scripts/setup.sh. It never fails an install: without the headers, a compiler or
// OpenBLAS it says what is missing and exits 0, and Baton runs tfjs's own kernels (the
// backend loader reports why). --strict exits 1 instead; --quiet prints only problems.
// node-gyp cannot download headers here (no internet), so it is always given --nodedir.

'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');

const root = path.resolve(__dirname, '..');
const strict = process.argv.includes('--strict');
const quiet = process.argv.includes('--quiet');
const say = (s) => process.stderr.write(`build-native: ${s}\n`);

/** A directory <d> with <d>/include/node/{node_api.h,common.gypi}, as node-gyp's --nodedir wants. */
function nodeDir() {
  const prefix = process.config && process.config.variables && process.config.variables.node_prefix;
  const candidates = [prefix, path.resolve(path.dirname(process.execPath), '..'), '/usr', '/usr/local'].filter(Boolean);
  for (const d of candidates) {
    const inc = path.join(d, 'include', 'node');
    if (fs.existsSync(path.join(inc, 'node_api.h')) && fs.existsSync(path.join(inc, 'common.gypi'))) return d;
  }
  return null;
}

function nodeGyp() {
  const candidates = [
    process.env.npm_config_node_gyp,
    path.resolve(
      path.dirname(process.execPath),
      '..',
      'lib',
      'node_modules',
      'npm',
      'node_modules',
      'node-gyp',
      'bin',
      'node-gyp.js',
    ),
  ];
  try {
    candidates.push(require.resolve('node-gyp/bin/node-gyp.js'));
  } catch {
    // not installed as a package
  }
  return candidates.find((c) => c && fs.existsSync(c)) || null;
}

function openBlas() {
  const headers = [
    '/usr/include/x86_64-linux-gnu/cblas.h',
    '/usr/include/aarch64-linux-gnu/cblas.h',
    '/usr/include/cblas.h',
    '/usr/include/openblas/cblas.h',
  ];
  const libs = [
    '/usr/lib/x86_64-linux-gnu/libopenblas.so',
    '/usr/lib/aarch64-linux-gnu/libopenblas.so',
    '/usr/lib/libopenblas.so',
    '/usr/local/lib/libopenblas.so',
  ];
  const problems = [];
  if (!headers.some((h) => fs.existsSync(h))) problems.push('no cblas.h (Debian: libopenblas-dev)');
  if (!libs.some((l) => fs.existsSync(l))) problems.push('no libopenblas.so (Debian: libopenblas-dev)');
  return problems;
}

function main() {
  const problems = [];
  const dir = nodeDir();
  if (!dir)
    problems.push(
      `no Node headers for ${process.version} (looked for include/node/node_api.h and common.gypi under the Node prefix, /usr and /usr/local; Debian: libnode-dev, or the nodejs package of nodesource)`,
    );
  const gyp = nodeGyp();
  if (!gyp) problems.push('no node-gyp (it comes with npm)');
  problems.push(...openBlas());
  if (problems.length > 0) {
    say(
      `not building the native kernels: ${problems.join('; ')}. Baton runs tfjs's own kernels; scripts/setup.sh installs what is missing.`,
    );
    return strict ? 1 : 0;
  }
  const r = spawnSync(process.execPath, [gyp, 'rebuild', `--nodedir=${dir}`], {
    cwd: path.join(root, 'native'),
    encoding: 'utf8',
  });
  if (r.status !== 0) {
    const tail = `${r.stdout || ''}${r.stderr || ''}`.trim().split('\n').slice(-15).join('\n');
    say(
      `node-gyp rebuild failed (exit ${r.status}${r.error ? `, ${r.error.message}` : ''}); Baton runs tfjs's own kernels. Its last lines:\n${tail}`,
    );
    return strict ? 1 : 0;
  }
  const built = path.join(root, 'native', 'build', 'Release', 'baton_native.node');
  try {
    const addon = require(built);
    if (!quiet) say(`built ${path.relative(root, built)} (headers from ${dir}/include/node; ${addon.config()})`);
  } catch (err) {
    say(`built ${built} but it does not load: ${err.message}; Baton runs tfjs's own kernels`);
    return strict ? 1 : 0;
  }
  return 0;
}

process.exitCode = main();
