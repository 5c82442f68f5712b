#!/usr/bin/env bash
# The one command that passes the tests on a fresh machine: install, lint, test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# tmux drives `baton inspect` in a real terminal (test/inspect.test.ts); without it that test is skipped.
if ! command -v tmux >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "test: installing tmux (Debian package, for the terminal test of baton inspect)" >&2
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-remove tmux >/dev/null; } ||
    echo "test: tmux did not install; the terminal test of baton inspect will be skipped" >&2
fi
npm run -s lint
npx mocha
