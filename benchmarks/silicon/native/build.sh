#!/usr/bin/env bash
# Build the native programs of the silicon kit for the H100 (sm_90), static CUDA runtime:
# launch_loop (this folder) and the simulator's own workloads transformer_step and
# pipeline_step (simmodel/gpgpusim/workloads/), so the same programs run on silicon and on
# GPGPU-Sim. Usage: build.sh OUTDIR [SUFFIX]   (NVCC=... picks the compiler, default nvcc)
#   here (CUDA 11.8, carried):  NVCC=/usr/bin/nvcc bash benchmarks/silicon/native/build.sh .native
#   on the GPU host (CUDA 13):  bash benchmarks/silicon/native/build.sh "$R/native" _cuda13
# One line and exit 2 when the compiler is missing or a build fails.
set -u
out=${1:?usage: build.sh OUTDIR [SUFFIX]}
suffix=${2:-}
nvcc=${NVCC:-nvcc}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
command -v "$nvcc" >/dev/null || { echo "build.sh: $nvcc not found" >&2; exit 2; }
mkdir -p "$out"
"$nvcc" --version | tail -1
for src in "$here/launch_loop.cu" "$root/simmodel/gpgpusim/workloads/transformer_step.cu" \
           "$root/simmodel/gpgpusim/workloads/pipeline_step.cu"; do
  name=$(basename "$src" .cu)_sm90$suffix
  if ! "$nvcc" -O2 -gencode arch=compute_90,code=sm_90 -o "$out/$name" "$src" >"$out/$name.log" 2>&1; then
    echo "build.sh: $name failed: $(grep -m1 -i error "$out/$name.log")" >&2
    exit 2
  fi
  echo "built $out/$name ($(stat -c %s "$out/$name") bytes)"
done
