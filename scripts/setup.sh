#!/usr/bin/env bash
# Installs what Baton needs on a fresh machine: from Debian, nats-server (required) and,
# when missing, what the optional native kernels build against (OpenBLAS with its
# threads, a C compiler, the Node headers); then npm packages (and the build they
# trigger, native kernels included: scripts/build-native.js, which never fails the
# install). Only nats-server can fail the setup: without the others Baton runs tfjs's
# own kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
have() { for f in "$@"; do [ -e "$f" ] && return 0; done; return 1; }
need_nats=0
if ! command -v nats-server >/dev/null 2>&1 && [ ! -x /usr/sbin/nats-server ]; then need_nats=1; fi
optional=()
if ! have /usr/include/*/cblas.h /usr/include/cblas.h /usr/include/openblas/cblas.h || ! have /usr/lib/*/libopenblas.so /usr/lib/libopenblas.so; then
  optional+=(libopenblas-dev libopenblas0-pthread)
fi
if ! command -v cc >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1; then optional+=(gcc make); fi
node_prefix="$(node -p 'process.config.variables.node_prefix || ""')"
# libnode-dev only beside Debian's own nodejs: beside another Node it conflicts with it.
if ! have "$node_prefix/include/node/node_api.h" /usr/include/node/node_api.h && dpkg -S "$(readlink -f "$(command -v node)")" >/dev/null 2>&1; then
  optional+=(libnode-dev)
fi
if [ "$need_nats" -eq 1 ] || [ "${#optional[@]}" -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  apt_install() { DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-remove "$@" >/dev/null; }
  if [ "$need_nats" -eq 1 ]; then
    echo "setup: installing nats-server (Debian package)" >&2
    $SUDO apt-get update -qq
    apt_install nats-server
  elif ! $SUDO apt-get update -qq; then
    optional=() # no package lists: the native kernels' packages stay out, and Baton runs tfjs's kernels
    echo "setup: apt-get update failed; not installing what the native kernels build against" >&2
  fi
  for p in "${optional[@]}"; do
    echo "setup: installing $p (Debian package, for the optional native kernels)" >&2
    apt_install "$p" || echo "setup: $p did not install (the native kernels may not build; Baton then uses tfjs's own)" >&2
  done
fi
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund # its install script builds the native kernels, its prepare script the TypeScript
else
  node scripts/build-native.js --quiet # never fails: without the addon Baton runs tfjs's kernels
  npm run build # tsc, and the executable bit `npx baton` needs on dist/cli/main.js
fi
