#!/usr/bin/env bash
# The one command that passes the tests on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
npx mocha
