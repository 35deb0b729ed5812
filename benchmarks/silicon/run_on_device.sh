#!/usr/bin/env bash
# Silicon session: every GPU path of hilsim on a lent GPU, in at most two `run` calls.
#
#   run(command="HILSIM_KIT_BUDGET_S=420 bash benchmarks/silicon/run_on_device.sh loop",
#       carry=[".whl", ".native"], timeout_s=480)
#   run(kind=OTHER, command="HILSIM_KIT_BUDGET_S=200 bash benchmarks/silicon/run_on_device.sh \
#       gpu2 versions probe cupti-build native-check loop-transformer_step ...",
#       carry=[".whl", ".native"], timeout_s=240)
#   run(command="bash benchmarks/silicon/run_on_device.sh gpu1", carry=[".whl"], timeout_s=480)
#   run(command="bash benchmarks/silicon/run_on_device.sh gpu2 STEP...", carry=[".whl"])
#
# loop: what the silicon-vs-sampled-simulation report needs: the microbenchmark suite
#       without its sweeps (CuPy's cache kept: the cubins disassembled by the host's
#       nvdisasm), the native programs of native/programs.tsv (built here for sm_90 and
#       carried, or built there when those do not run) each under the CUPTI injection
#       profiler with its bare run and ncu on every launch (--cache-control none, the
#       counters the warm-state placement reads), and the CuPy workload's first 200
#       launches under ncu with --cache-control none and all (the flush's effect); then,
#       while the budget lasts, the injection library's overhead (launch_loop, cupy_mix)
#       and the transformer loop's NVTX steps.
#
# gpu1: versions and clocks, probe, the whole microbenchmark suite, the CuPy workload and
#       the transformer training loop under cupti (+ ncu for the first 200 launches,
#       + the bare run for the overhead ratio) and torch, auto and nsys, second runs for
#       the run-to-run check, then ResNet-50 while the budget lasts.
# gpu2: the steps named on the command line (a rerun after a fix), same budget rules.
# native: the CUPTI injection library's overhead against warm bare runs (overhead.py:
#       medians of 5 runs) on launch_loop (.native/, carried) and on the CuPy workload
#       (+ one in-process run), and the transformer loop's NVTX steps in process and
#       through the injection library (each step also by name after gpu2: native-build,
#       overhead-native-cuda13, native-transformer-cupti, ...).
#
# Every step runs under its own time limit (SIGINT first: the agent keeps what it
# captured) and is skipped once the stage's budget (HILSIM_KIT_BUDGET_S, default 380 s)
# would be overrun, so the outputs are always packed before the device tool's limit.
# Each step's exit code and seconds go to paths.tsv (docs/silicon.md's table). The
# accelerator's settings are left as they are (the lending workplace forbids changing
# them): the clocks are recorded before, during and after instead of locked, and the
# microbenchmarks run with --no-lock-clocks (they would otherwise nvidia-smi -lgc as root).
# Outputs: $OUT/<stage>.tar.gz (everything but the raw profiler files; .tar.xz when
# gzip leaves it over 15 MB), <stage>-small.tar.gz (logs and JSON alone),
# $OUT/<stage>-<name>-raw.tar.gz (each step's raw files, when under 15 MB), <stage>-paths.tsv, <stage>.log.
set -u
stage=${1:?usage: run_on_device.sh gpu1|gpu2 [STEP...]}
shift
OUT=${OUT:-$PWD/out-silicon}
R=/tmp/hilsim-$stage
rm -rf "$R"; mkdir -p "$R/logs" "$OUT"
ROOT=$PWD
BUDGET=${HILSIM_KIT_BUDGET_S:-380}
T0=$SECONDS
cd "$R"  # not the repository root: its hilsim/ folder would shadow the installed package
exec > >(tee "$OUT/$stage.log") 2>&1

pack() {
  cp "$R/paths.tsv" "$OUT/$stage-paths.tsv" 2>/dev/null
  # insurance: the small files alone (logs, JSON, manifests), whatever the bundles weigh
  (cd /tmp && find "hilsim-$stage" -path '*-raw' -prune -o -type f \( -name '*.json' \
    -o -name '*.log' -o -name '*.tsv' -o -name '*.txt' \) -size -4M -print) \
    | tar -C /tmp -czf "$OUT/$stage-small.tar.gz" -T -
  tar -C /tmp --exclude='*-raw' -czf "$OUT/$stage.tar.gz" "hilsim-$stage"
  if [ "$(stat -c %s "$OUT/$stage.tar.gz")" -gt 15000000 ]; then
    rm -f "$OUT/$stage.tar.gz"
    tar -C /tmp --exclude='*-raw' -cJf "$OUT/$stage.tar.xz" "hilsim-$stage"
    [ "$(stat -c %s "$OUT/$stage.tar.xz")" -gt 15000000 ] && rm -f "$OUT/$stage.tar.xz"
  fi
  local raw
  for raw in "$R"/*-raw; do  # one tarball per raw folder (the tool returns <= 16 MB a file)
    [ -d "$raw" ] || continue
    local t=$OUT/$stage-$(basename "$raw").tar.gz
    tar -C /tmp -czf "$t" "hilsim-$stage/$(basename "$raw")"
    if [ "$(stat -c %s "$t")" -gt 15000000 ]; then echo "$t over 15 MB: left out"; rm -f "$t"; fi
  done
  ls -la "$OUT"; cat "$R/paths.tsv"
}
trap 'echo "stopped: packing what ran"; pack; exit 1' TERM INT

if ls "$ROOT"/.whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$ROOT"/.whl/*.whl || echo "wheel install failed" >&2
fi
# the carried hilsim wheel (/tmp/site) is the package; the workloads' folder for
# --nvtx-module transformer_model:train_step
export PYTHONPATH=/tmp/site:$ROOT/benchmarks/silicon/workloads
export PYTHONUNBUFFERED=1
W=$ROOT/benchmarks/silicon/workloads
N=$ROOT/.native  # native programs built here (benchmarks/silicon/native/build.sh), carried
OVERHEAD=$ROOT/benchmarks/silicon/overhead.py

printf 'step\trc\tseconds\n' >"$R/paths.tsv"
step() {  # step NAME LIMIT_S CMD ARGS...: run under a time limit, log, record rc and seconds
  local name=$1 limit=$2; shift 2
  local used=$((SECONDS - T0))
  if [ $((used + limit / 2)) -gt "$BUDGET" ]; then
    printf '%s\tskipped\t0\n' "$name" >>"$R/paths.tsv"
    echo "== $name: skipped (budget: ${used}s of ${BUDGET}s used)"; return
  fi
  local left=$((BUDGET - used)); [ "$limit" -gt "$left" ] && limit=$left
  local t0; t0=$(date +%s.%N)
  echo "== $name (limit ${limit}s, at ${used}s): $*"
  if declare -F "$1" >/dev/null; then  # a function of this script: through bash
    timeout -k 20 -s INT "$limit" bash -c '"$@"' _ "$@" >"$R/logs/$name.log" 2>&1
  else
    timeout -k 20 -s INT "$limit" "$@" >"$R/logs/$name.log" 2>&1
  fi
  local rc=$?
  local dt; dt=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)")
  printf '%s\t%s\t%s\n' "$name" "$rc" "$dt" >>"$R/paths.tsv"
  echo "   rc=$rc ${dt}s"; tail -n 4 "$R/logs/$name.log"
}

versions() {
  date -u +%FT%TZ; uname -a; nvidia-smi; nvidia-smi -q -d CLOCK,PERFORMANCE,POWER
  ncu --version; command -v nsys || echo "nsys: absent"; nvcc --version
  python3 -m pip list 2>/dev/null
  python3 - <<'EOF'
import importlib
for name in ("hilsim", "cupy", "cupti", "nvtx", "pynvml", "torch", "torchvision", "msgspec"):
    try:
        module = importlib.import_module(name)
        print(name, getattr(module, "__version__", "?"), getattr(module, "__file__", ""))
    except Exception as exc:  # noqa: BLE001
        print(name, "IMPORT FAILED:", type(exc).__name__, exc)
EOF
}
clocks() {  # the clocks and why they are where they are (not changed by this kit)
  nvidia-smi --query-gpu=timestamp,name,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,clocks.applications.graphics,clocks.default_applications.graphics,power.draw,temperature.gpu --format=csv
  nvidia-smi --query-gpu=clocks_event_reasons.active --format=csv \
    || nvidia-smi --query-gpu=clocks_throttle_reasons.active --format=csv
}
ncu_metrics() {  # ncu's metric names on this chip, and which of hilsim's are not among them
  ncu --query-metrics >"$R/ncu-query-metrics.txt" 2>&1
  echo "ncu --query-metrics rc=$? ($(wc -l <"$R/ncu-query-metrics.txt") lines)"
  python3 - "$R/ncu-query-metrics.txt" <<'EOF'
import sys
from hilsim.agent.ncu import DEFAULT_METRICS
listed = {line.split()[0] for line in open(sys.argv[1]) if line.strip()}
missing = [m for m in DEFAULT_METRICS if m.split(".")[0] not in listed]
print(f"{len(DEFAULT_METRICS)} default metrics, base name not listed: {missing}")
EOF
}
profile() {  # profile NAME LIMIT_S BACKEND [agent options] -- CMD...
  local name=$1 limit=$2 backend=$3; shift 3
  step "$name" "$limit" python3 -m hilsim.cli.main agent profile -o "$R/$name" \
    --backend "$backend" --force "$@"
}

#: the counters of the loop's programs, every launch (ncu --cache-control none): time and
#: cycles, the DRAM reads and L2 misses the warm-state placement reads, the L2 reads, shape
LOOP_METRICS=gpu__time_duration.sum,gpu__cycles_elapsed.max,sm__cycles_active.avg,\
dram__sectors_read.sum,lts__t_sectors_lookup_miss.sum,lts__t_sectors_op_read.sum,\
launch__grid_size,launch__block_size
native_dir() {  # the folder of the native programs that run here (native-check's choice)
  if [ -s "$R/native-dir" ]; then cat "$R/native-dir"; else echo "$N"; fi
}
native_check() {  # the carried CUDA 11.8 builds if they run here, else the same built here
  if "$N/launch_loop_sm90" --launches 10 && "$N/gaussian_sm90" -s 4 >/dev/null; then
    echo "$N" >"$R/native-dir"; echo "carried builds run: $N"; return 0
  fi
  echo "carried builds do not run here: building with $(command -v nvcc)"
  bash "$ROOT/benchmarks/silicon/native/build.sh" /tmp/hilsim-native || return 2
  python3 "$ROOT/benchmarks/silicon/native/programs.py" rodinia --tree "$N/rodinia-src" \
    --out /tmp/hilsim-native || return 2
  echo /tmp/hilsim-native >"$R/native-dir"
}
loop_program() {  # one program of programs.tsv on silicon: CUPTI (+ bare run), ncu on all
  local name=$1 args
  args=$(python3 "$ROOT/benchmarks/silicon/native/programs.py" list | awk -F'\t' -v n="$name" \
    '$1 == n {print $2}')
  [ -n "$args" ] || { echo "loop-$name: not in programs.tsv" >&2
    printf '%s\tunknown\t0\n' "loop-$name" >>"$R/paths.tsv"; return; }
  mkdir -p "$R/run-$name"  # the program's own output files land here
  # shellcheck disable=SC2086  # the arguments are words
  step "loop-$name" 120 env -C "$R/run-$name" python3 -m hilsim.cli.main agent profile \
    -o "$R/loop-$name" --backend cupti --force --measure-overhead --detailed-all \
    --detailed-cache-control none --metrics "$LOOP_METRICS" --detailed-timeout 90 \
    --keep-raw "$R/loop-$name-raw" -- "$(native_dir)/${name}_sm90" $args
}

run_step() {  # the named step of the kit
  case $1 in
  versions) step versions 60 versions ;;
  clocks-*) step "$1" 15 clocks ;;
  ncu-metrics) step ncu-metrics 40 ncu_metrics ;;
  probe) step probe 40 python3 -m hilsim.cli.main agent probe -o "$R/probe.json" --json ;;
  microbench) step microbench 210 python3 -m hilsim.cli.main agent microbench --no-lock-clocks \
      -o "$R/microbench.json" ;;
  cupy-cupti) profile cupy-cupti 150 cupti --measure-overhead --detailed-first 200 \
      --detailed-timeout 100 --keep-raw "$R/cupy-cupti-raw" -- python3 "$W/cupy_mix.py" ;;
  transformer-cupti) profile transformer-cupti 150 cupti --measure-overhead \
      --detailed-first 200 --detailed-timeout 100 --nvtx-module transformer_model:train_step \
      --keep-raw "$R/transformer-cupti-raw" -- python3 "$W/transformer_train.py" ;;
  cupy-cupti-light) profile cupy-cupti-light 90 cupti --measure-overhead \
      --keep-raw "$R/cupy-cupti-light-raw" -- python3 "$W/cupy_mix.py" ;;
  transformer-cupti-light) profile transformer-cupti-light 60 cupti --measure-overhead \
      -- python3 "$W/transformer_train.py" ;;
  dram-write-check) step dram-write-check 40 python3 "$ROOT/benchmarks/silicon/dram_write_check.py" ;;
  cupy-torch) profile cupy-torch 60 torch --measure-overhead --keep-raw "$R/cupy-torch-raw" \
      -- python3 "$W/cupy_mix.py" ;;
  transformer-torch) profile transformer-torch 60 torch --measure-overhead \
      --keep-raw "$R/transformer-torch-raw" --nvtx-module transformer_model:train_step -- python3 "$W/transformer_train.py" ;;
  cupy-auto) profile cupy-auto 40 auto -- python3 "$W/cupy_mix.py" --iterations 200 ;;
  cupy-nsys) profile cupy-nsys 20 nsys -- python3 "$W/cupy_mix.py" --iterations 200 ;;
  cupy-cupti-run2) profile cupy-cupti-run2 40 cupti -- python3 "$W/cupy_mix.py" ;;
  transformer-cupti-run2) profile transformer-cupti-run2 40 cupti \
      -- python3 "$W/transformer_train.py" ;;
  resnet-cupti) profile resnet-cupti 120 cupti --detailed-first 200 --detailed-timeout 80 \
      -- python3 "$W/resnet50_infer.py" ;;
  resnet-torch) profile resnet-torch 50 torch -- python3 "$W/resnet50_infer.py" ;;
  cupti-build) step cupti-build 60 python3 -m hilsim.cli.main agent cupti-build ;;
  native-build) step native-build 150 bash "$ROOT/benchmarks/silicon/native/build.sh" \
      /tmp/hilsim-nvcc13 _cuda13 ;;
  overhead-native) step overhead-native 90 python3 "$OVERHEAD" -o "$R/overhead-native.json" \
      --runs 5 --keep-raw "$R/overhead-native-raw" -- "$(native_dir)/launch_loop_sm90" \
      --launches 60000 ;;
  overhead-native-cuda13) step overhead-native-cuda13 60 python3 "$OVERHEAD" \
      -o "$R/overhead-native-cuda13.json" --runs 5 -- /tmp/hilsim-nvcc13/launch_loop_sm90_cuda13 \
      --launches 60000 ;;
  overhead-cupy) step overhead-cupy 150 python3 "$OVERHEAD" -o "$R/overhead-cupy.json" \
      --runs 3 --in-process-runs 1 --keep-raw "$R/overhead-cupy-raw" -- python3 "$W/cupy_mix.py" ;;
  native-transformer-cupti) profile native-transformer-cupti 60 cupti --measure-overhead \
      --keep-raw "$R/native-transformer-cupti-raw" -- "$N/transformer_step_sm90" ;;
  native-pipeline-cupti) profile native-pipeline-cupti 60 cupti --measure-overhead \
      --keep-raw "$R/native-pipeline-cupti-raw" -- "$N/pipeline_step_sm90" ;;
  transformer-cupti-inject) step transformer-cupti-inject 90 env HILSIM_CUPTI_MODE=injection \
      python3 -m hilsim.cli.main agent profile -o "$R/transformer-cupti-inject" --backend cupti \
      --force --measure-overhead --keep-raw "$R/transformer-cupti-inject-raw" \
      -- python3 "$W/transformer_train.py" ;;
  native-check) step native-check 200 native_check ;;
  cubins) step cubins 60 python3 "$ROOT/benchmarks/silicon/cubins.py" "$R/cupy-cache" \
      -o "$R/cubins" ;;
  microbench-quick) step microbench-quick 150 env CUPY_CACHE_DIR="$R/cupy-cache" \
      python3 -m hilsim.cli.main agent microbench --no-lock-clocks --quick \
      -o "$R/microbench.json" ;;
  loop-*) loop_program "${1#loop-}" ;;
  cupy-ncu-all|cupy-ncu-none) profile "$1" 90 cupti --detailed-first 200 \
      --detailed-cache-control "${1#cupy-ncu-}" --metrics "$LOOP_METRICS" \
      --detailed-timeout 75 --keep-raw "$R/$1-raw" -- python3 "$W/cupy_mix.py" --iterations 200 ;;
  *) echo "unknown step $1" >&2; printf '%s\tunknown\t0\n' "$1" >>"$R/paths.tsv" ;;
  esac
}

export R
export -f versions clocks ncu_metrics native_check
export ROOT N

case $stage in
gpu1)
  steps=(versions clocks-start ncu-metrics probe microbench clocks-after-microbench
         cupy-cupti transformer-cupti cupy-torch transformer-torch cupy-auto cupy-nsys
         cupy-cupti-run2 transformer-cupti-run2 clocks-end resnet-cupti resnet-torch) ;;
native)
  steps=(versions clocks-start cupti-build overhead-native overhead-cupy transformer-cupti-light
         transformer-cupti-inject clocks-end) ;;
loop)
  mapfile -t loop_steps < <(python3 "$ROOT/benchmarks/silicon/native/programs.py" list \
    | cut -f1 | sed 's/^/loop-/')
  [ ${#loop_steps[@]} -gt 0 ] || echo "loop: programs.py list gave no programs" >&2
  steps=(versions clocks-start probe cupti-build native-check microbench-quick cubins
         "${loop_steps[@]}" clocks-mid cupy-ncu-none cupy-ncu-all overhead-native overhead-cupy
         transformer-cupti-light clocks-end) ;;
gpu2)
  [ $# -gt 0 ] || { echo "gpu2 needs the steps to run" >&2; exit 2; }
  steps=(clocks-start "$@" clocks-end) ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac
for s in "${steps[@]}"; do run_step "$s"; done
pack
