#!/usr/bin/env bash
# Analyzer side of the silicon session (runs here, no GPU): unpack what
# run_on_device.sh returned, then plans, evaluation, method comparison, the validation
# report with the timing model tuned from this run's microbench, and the run-to-run
# portability checks. Usage: analyze.sh DIR_WITH_TARBALLS OUTDIR
set -u
src=${1:?usage: analyze.sh DIR_WITH_TARBALLS OUTDIR}; out=${2:?OUTDIR}
mkdir -p "$out"
for t in "$src"/gpu1.tar.gz "$src"/gpu2.tar.gz; do
  [ -f "$t" ] && tar -C "$out" -xzf "$t"
done
G1=$out/hilsim-gpu1; G2=$out/hilsim-gpu2; A=$out/analysis; mkdir -p "$A"
run() { echo "== $*"; "$@" || echo "   (exit $?)"; }

timing=$G1/tuned/timing.json
for b in "$G1/cupy-cupti" "$G1/cupy-torch" "$G2/resnet-cupti" "$G2/resnet-torch" \
         "$G2/transformer-cupti" "$G2/transformer-torch"; do
  [ -d "$b" ] || { echo "missing $b"; continue; }
  n=$(basename "$b")
  run hilsim plan "$b" -m stem -o "$A/$n-stem.json"
  run hilsim plan "$b" -m pka -o "$A/$n-pka.json"
  run hilsim evaluate "$b" -m stem --seeds 20 -o "$A/$n-eval-stem.json"
  run hilsim compare "$b" --seeds 10 -o "$A/$n-compare"
  if [ -f "$timing" ]; then
    run hilsim validate --silicon "$b" --plan "$A/$n-stem.json" --plan "$A/$n-pka.json" \
      --model "$timing" -o "$A/$n-validate"
  fi
done
run hilsim portability --plan "$A/cupy-cupti-stem.json" --source "$G1/cupy-cupti" \
  --bundle "$G1/cupy-cupti-run2" -o "$A/cupy-run2-portability.json"
run hilsim portability --plan "$A/transformer-cupti-stem.json" --source "$G2/transformer-cupti" \
  --bundle "$G2/transformer-cupti-run2" -o "$A/transformer-run2-portability.json"
run hilsim portability --plan "$A/cupy-cupti-stem.json" --source "$G1/cupy-cupti" \
  --bundle "$G1/cupy-torch" -o "$A/cupy-cupti-vs-torch-portability.json"
cat "$G1/paths.tsv" "$G2/paths.tsv" 2>/dev/null
