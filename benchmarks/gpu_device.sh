#!/usr/bin/env bash
# The GPU check as one call on a lent GPU machine (the `device` tool: one command, a few files back, minutes counted):
#   1. a gate: MODEL=tiny on the GPU, both sides' CUDA paths (the real job's and studyctl's `device: cuda` points) in
#      about a minute, so a fault there costs a minute, not the main run;
#   2. the main shape (MODEL, default auto: XL where the disk is fast and large enough, else GPT-2 large) in what
#      is left of DEADLINE seconds;
#   3. everything packed into $OUT/gpu-check.tgz, the main table beside it (the tool returns at most 8 files).
# From the repository root, with the wheels the image lacks in build/gpu-wheels (see gpu_check.sh):
#   OUT=/tmp/out DEADLINE=570 [MODEL=auto|xl|large|medium] [GATE=1] [WRITES=1] bash benchmarks/gpu_device.sh
# Measured on an H200 (2026-11-27): MODEL=large with the gate ~7 minutes; MODEL=medium GATE=0 ~3.5 minutes, so
# MODEL=medium GATE=0 WRITES=2 (two checkpoints a point: the first pays for fresh host pages) ~6.5.
set -u
start=$SECONDS
DEADLINE=${DEADLINE:-570}
DEST=${OUT:?OUT: where the packed results go}
work=/tmp/gpu-check
rm -rf "$work"; mkdir -p "$work" "$DEST"
pack() {
  tar czf "$DEST/gpu-check.tgz" -C "$work" . 2>/dev/null
  cp "$work/main/table.md" "$DEST/table.md" 2>/dev/null
  cp "$work/main/run.log" "$DEST/main.log" 2>/dev/null
  return 0
}
trap pack EXIT
export PYTHONUNBUFFERED=1 WHEELS=${WHEELS-build/gpu-wheels}  # WHEELS= (empty): this environment has them
if [[ ${GATE:-1} == 1 ]]; then  # GATE=0: the paths passed on this kind of machine before
  if ! OUT=$work/gate MODEL=tiny LIMIT=150 bash benchmarks/gpu_check.sh > /dev/null 2>&1; then
    echo "== the gate failed (tiny shape on the GPU); its log:"; tail -60 "$work/gate/run.log"; exit 1
  fi
  echo "== gate passed in $((SECONDS - start)) s"; grep '^|' "$work/gate/run.log"
fi
left=$((DEADLINE - (SECONDS - start) - 45))  # the main run's install and dd, then packing
echo "== main run: $left s for the comparison"
OUT=$work/main MODEL=${MODEL:-auto} LIMIT=$left bash benchmarks/gpu_check.sh
