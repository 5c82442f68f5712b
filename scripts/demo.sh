#!/usr/bin/env bash
# The main demo: a multi-process pipeline over a local NATS server, readiness-first bf
# against binding 1f1b on an imbalanced profile with the paper's jitter, bf both at the
# default buffer limit and at 1F1B's memory (--buffer-limit depth, entry bf@depth).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >&2
mkdir -p out
node dist/cli/main.js run --transport nats --processes per-stage \
  --stages 4 --microbatches 16 --profile multimodal --jitter paper --seed 1 --iterations 2 \
  --compare 1f1b,bf,bf@depth --reference offline --trace out/demo-trace.json --gantt out/demo-gantt.svg "$@"
