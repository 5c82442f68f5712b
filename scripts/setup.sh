#!/usr/bin/env bash
# Installs what Baton needs on a fresh machine: npm packages (and the build they
# trigger), and nats-server from Debian when it is not on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nats-server >/dev/null 2>&1 && [ ! -x /usr/sbin/nats-server ]; then
  echo "setup: installing nats-server (Debian package)" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nats-server >/dev/null
fi
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund # its prepare script builds
else
  npm run build # tsc, and the executable bit `npx baton` needs on dist/cli/main.js
fi
