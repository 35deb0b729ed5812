#!/usr/bin/env bash
# Silicon session (issue 4): every GPU path of hilsim on a lent GPU, in two `run` calls.
#
#   run(command="bash benchmarks/silicon/run_on_device.sh gpu1", carry=[".whl"])
#   run(command="bash benchmarks/silicon/run_on_device.sh gpu2", carry=[".whl"])
#
# gpu1: install, probe, the whole microbenchmark suite, the CuPy workload under every
#       light backend (+ overhead, + ncu for the first 200 launches, + a second run).
# gpu2: ResNet-50 inference and the transformer training loop under every light backend,
#       ncu for the first 200 launches, NVTX (workload ranges and --nvtx-module), a
#       second transformer run for the run-to-run portability check.
# Each step's exit code and seconds go to paths.tsv (the closing note's table); a step
# that fails does not stop the others. Everything lands in $OUT/<stage>.tar.gz (the
# device tool returns at most 8 files) plus paths.tsv and the log, unpacked here by
# benchmarks/silicon/analyze.sh. See benchmarks/silicon/README.md.
set -u
stage=${1:?usage: run_on_device.sh gpu1|gpu2}
OUT=${OUT:-$PWD/out-silicon}
R=/tmp/hilsim-$stage
rm -rf "$R"; mkdir -p "$R/logs" "$OUT"
ROOT=$PWD

if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || echo "wheel install failed" >&2
fi
export PYTHONPATH=$ROOT:/tmp/site:$ROOT/benchmarks/silicon/workloads
export PYTHONUNBUFFERED=1
hilsim() { python3 -m hilsim.analyzer.cli "$@"; }
W=$ROOT/benchmarks/silicon/workloads

printf 'step\trc\tseconds\n' >"$R/paths.tsv"
step() {  # step NAME CMD ARGS...: run, log, record rc and wall seconds
  local name=$1; shift
  local t0; t0=$(date +%s.%N)
  echo "== $name: $*"
  "$@" >"$R/logs/$name.log" 2>&1
  local rc=$?
  local dt; dt=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)")
  printf '%s\t%s\t%s\n' "$name" "$rc" "$dt" >>"$R/paths.tsv"
  echo "   rc=$rc ${dt}s"; tail -n 3 "$R/logs/$name.log"
}

versions() {
  date -u +%FT%TZ; uname -a; nvidia-smi; ncu --version; which nsys || echo "nsys: absent"
  python3 -m pip list 2>/dev/null | grep -i -E "^(torch|torchvision|cupy|cupti|nvtx|nvidia-ml|numpy|pandas) "
}
profile() {  # profile NAME BACKEND [agent options] -- CMD...
  local name=$1 backend=$2; shift 2
  step "$name" python3 -m hilsim.analyzer.cli agent profile -o "$R/$name" --backend "$backend" --force "$@"
}

case $stage in
gpu1)
  step versions versions
  step probe hilsim agent probe -o "$R/probe.json" --json
  step microbench hilsim agent microbench -o "$R/microbench.json"
  step tune-from-microbench hilsim tune "$R/microbench.json" --device-facts "$R/probe.json" -o "$R/tuned"
  for b in auto nsys; do profile "cupy-$b" "$b" -- python3 "$W/cupy_mix.py" --iterations 200; done
  profile cupy-cupti cupti --measure-overhead --detailed-first 200 --keep-raw "$R/cupy-cupti-raw" \
    -- python3 "$W/cupy_mix.py"
  profile cupy-torch torch --measure-overhead -- python3 "$W/cupy_mix.py"
  profile cupy-cupti-run2 cupti -- python3 "$W/cupy_mix.py"
  ;;
gpu2)
  step versions versions
  profile resnet-cupti cupti --measure-overhead --detailed-first 200 --keep-raw "$R/resnet-cupti-raw" \
    -- python3 "$W/resnet50_infer.py"
  profile resnet-torch torch --measure-overhead -- python3 "$W/resnet50_infer.py"
  profile transformer-cupti cupti --detailed-first 200 --nvtx-module transformer_model:train_step \
    -- python3 "$W/transformer_train.py"
  profile transformer-torch torch --nvtx-module transformer_model:train_step \
    -- python3 "$W/transformer_train.py"
  profile transformer-cupti-run2 cupti -- python3 "$W/transformer_train.py"
  ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac

cp "$R/paths.tsv" "$OUT/$stage-paths.tsv"
tar -C /tmp -czf "$OUT/$stage.tar.gz" "hilsim-$stage"
ls -la "$OUT"
cat "$R/paths.tsv"
