#!/usr/bin/env bash
# Install what building and running GPGPU-Sim (PTX mode) needs on Debian 12 (bookworm):
# the CUDA 11.8 toolkit from Debian's non-free component (GPGPU-Sim's PTX front end needs a
# toolkit <= 11.x), a C++ toolchain, bison, flex, zlib headers and makedepend (xutils-dev).
# Idempotent: packages already present are not downloaded again. Needs root (or sudo).
# Used by .ci/run and by users: `bash "$(hilsim gpgpusim toolchain-script)"`.
# Fresh machine: ~4 min (~1.6 GB download); all present: < 1 s.
set -euo pipefail

started=$SECONDS
die() { echo "gpgpusim toolchain: $*" >&2; exit 2; }

command -v dpkg-query >/dev/null && command -v apt-get >/dev/null \
  || die "this script is for Debian (apt-get, dpkg); install a CUDA <= 11.x toolkit, g++, bison, flex, zlib headers and makedepend by hand"

SUDO=""
if [ "$(id -u)" != "0" ]; then
  command -v sudo >/dev/null || die "needs root or sudo to install packages"
  SUDO="sudo"
fi

pkgs=(nvidia-cuda-toolkit build-essential bison flex zlib1g-dev xutils-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "gpgpusim toolchain: all of ${pkgs[*]} already installed"
else
  # nvidia-cuda-toolkit lives in non-free: add the component for this release once.
  codename=bookworm
  if [ -r /etc/os-release ]; then
    # shellcheck disable=SC1091
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  fi
  src=/etc/apt/sources.list.d/hilsim-nonfree.sources
  if ! grep -rqs "non-free" /etc/apt/sources.list /etc/apt/sources.list.d/ ; then
    $SUDO tee "$src" >/dev/null <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: ${codename} ${codename}-updates
Components: contrib non-free non-free-firmware
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq || die "apt-get update failed (network? sources in $src)"
  # the EULA of the non-free CUDA packages is accepted non-interactively
  echo "nvidia-cuda-toolkit nvidia-cuda-toolkit/license note" \
    | $SUDO debconf-set-selections 2>/dev/null || true
  log=$(mktemp)
  if ! $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    die "apt-get install ${missing[*]} failed (last lines above)"
  fi
  rm -f "$log"
  echo "gpgpusim toolchain: installed ${missing[*]} in $((SECONDS - started)) s"
fi

# The version that GPGPU-Sim will use: /usr/bin/nvcc (not a CUDA 13 wrapper earlier on PATH).
if [ -x /usr/bin/nvcc ]; then
  ver=$(/usr/bin/nvcc --version | sed -n 's/.*release \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p')
  case "$ver" in
    [1-9].*|1[01].*) echo "gpgpusim toolchain: /usr/bin/nvcc is CUDA $ver (use CUDA_INSTALL_PATH=/usr)" ;;
    *) die "/usr/bin/nvcc is CUDA ${ver:-unknown}; GPGPU-Sim needs <= 11.x" ;;
  esac
else
  die "/usr/bin/nvcc missing after installing nvidia-cuda-toolkit"
fi
