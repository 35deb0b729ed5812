#!/usr/bin/env bash
# Install what building and running GPGPU-Sim (PTX mode) needs on Debian 12 (bookworm):
# the CUDA 11.8 toolkit from Debian's non-free component (GPGPU-Sim's PTX front end needs a
# toolkit <= 11.x), a C++ toolchain, bison, flex, zlib headers and makedepend (xutils-dev).
# Idempotent: packages already present are not downloaded again. Needs root (or sudo).
# Used by .ci/run and by users: `bash "$(hilsim gpgpusim toolchain-script)"`.
set -euo pipefail

SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

pkgs=(nvidia-cuda-toolkit build-essential bison flex zlib1g-dev xutils-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "gpgpusim toolchain: all of ${pkgs[*]} already installed"
  exit 0
fi

# nvidia-cuda-toolkit lives in non-free: add the component for bookworm(-updates) once.
src=/etc/apt/sources.list.d/hilsim-nonfree.sources
if ! grep -rqs "non-free" /etc/apt/sources.list /etc/apt/sources.list.d/ ; then
  $SUDO tee "$src" >/dev/null <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: contrib non-free non-free-firmware
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# the EULA of the non-free CUDA packages is accepted non-interactively
echo "nvidia-cuda-toolkit nvidia-cuda-toolkit/license note" | $SUDO debconf-set-selections 2>/dev/null || true
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "gpgpusim toolchain: installed ${missing[*]}"
