#!/usr/bin/env bash
# The one command that passes the tests on a fresh machine: install, lint, test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
npm run -s lint
npx mocha
