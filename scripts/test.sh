#!/usr/bin/env bash
# The one command that passes the tests on a fresh machine: install, lint, test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
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
npx mocha
