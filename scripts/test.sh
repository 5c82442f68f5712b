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
# iproute2's ip makes the network namespaces of the cross-machine test (test/netns.test.ts, root only).
if ! command -v ip >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "test: installing iproute2 (Debian package, for the network-namespace test)" >&2
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-remove iproute2 >/dev/null; } ||
    echo "test: iproute2 did not install; the network-namespace test will say it cannot run" >&2
fi
# The report test opens a report in headless Chromium (Debian's package); without it, or
# without root to install it, that test is skipped with a message.
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium; } >/dev/null 2>&1) ||
      echo "test.sh: could not install chromium; the report's browser test will be skipped" >&2
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 ||
      echo "test.sh: could not install chromium; the report's browser test will be skipped" >&2
  fi
fi
npm run -s lint
npx mocha 'dist/test/**/*.test.js'
