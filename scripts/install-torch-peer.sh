#!/usr/bin/env bash
# Installs the compute peer of `npm run bench -- peer`: Debian's PyTorch (python3-torch,
# CPU) with the threaded OpenBLAS it is fast with (libopenblas0-pthread; with Debian's
# reference BLAS PyTorch trains about 20x slower). Run once, as root or with sudo.
set -euo pipefail
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-torch libopenblas0-pthread >/dev/null
/usr/bin/python3 -c 'import torch; print(f"torch {torch.__version__}, BLAS threads {torch.get_num_threads()}")'
