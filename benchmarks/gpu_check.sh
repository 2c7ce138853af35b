#!/usr/bin/env bash
# The GPU check in one run (see benchmarks/gpu_check.py): disk speed, the environment the GPU image lacks, then a real
# training job's checkpoints against studyctl's engine points of the same layout, everything under $OUT.
# From the repository root:  OUT=/tmp/gpuout MODEL=auto|xl|large|tiny [WHEELS=build/gpu-wheels] [LIMIT=540] [WRITES=1] bash benchmarks/gpu_check.sh
# WHEELS: cp312 wheels of what the image lacks (pydantic, pydantic-core, annotated-types, typing-inspection,
# typing-extensions, orjson, submitit, mpich, mpi4py, boto3, botocore, s3transfer, jmespath), downloaded beforehand:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#     --platform manylinux_2_28_x86_64 --platform any -d build/gpu-wheels pydantic==... (pip list gives the versions)
# Without WHEELS the current environment must have them (this project's venv: the CPU mode's test).
set -u
OUT=${OUT:-/tmp/gpuout}; mkdir -p "$OUT"
MODEL=${MODEL:-auto}
exec > >(tee -a "$OUT/run.log") 2>&1
repo=$(pwd)
PY=${PY:-python3}
echo "== env $(date -u +%FT%TZ)"
nvidia-smi -L 2>/dev/null; nproc; free -g | head -2; uname -r
# the disk under test: the largest writable place among /tmp and the repo's
DIR=$(df --output=avail,target /tmp "$repo" | tail -n +2 | sort -rn | head -1 | awk '{print $2}'); DIR=${DIR%/}/gpucheck
mkdir -p "$DIR"; echo "DIR=$DIR"; findmnt -T "$DIR" -o TARGET,SOURCE,FSTYPE,OPTIONS | cat
count=256; [[ $MODEL == tiny ]] && count=16
echo "== dd $((count * 16)) MiB direct write / cold read"
w=$(dd if=/dev/zero of="$DIR/dd" bs=16M count=$count oflag=direct conv=fsync 2>&1 | tail -1); echo "$w"
dd if="$DIR/dd" of=/dev/null bs=16M iflag=direct 2>&1 | tail -1
rm -f "$DIR/dd"
mbps=$(echo "$w" | awk '{v=$(NF-1); u=$NF; if (u ~ /^GB/) v*=1000; print int(v)}')
avail=$(df --output=avail -B1G "$DIR" | tail -1 | tr -d ' ')
# XL needs ~55 GiB free (state on disk twice at the peak) and a disk fast enough for a few minutes' run
if [[ $MODEL == auto ]]; then MODEL=xl; { ((mbps < 1200)) || ((avail < 55)); } && MODEL=large; fi
echo "write ${mbps} MB/s, ${avail} GiB free: model $MODEL"
if [[ -n ${WHEELS:-} ]]; then
  echo "== install"
  SITE=/tmp/site
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $SITE "$WHEELS"/*.whl || exit 1
  # mpich's wheel carries mpiexec and libmpi; the image has no unzip
  rm -rf /tmp/mpich && $PY -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall("/tmp/mpich")' "$WHEELS"/mpich-*.whl
  MPI=$(echo /tmp/mpich/*.data/data); chmod +x "$MPI"/bin/*
  export PYTHONPATH=$SITE:$repo PATH=$MPI/bin:$PATH MPI4PY_LIBMPI=$MPI/lib/libmpi.so.12
else
  export PYTHONPATH=$repo
fi
echo "mpiexec=$(command -v mpiexec)"
$PY -c 'import studyctl, worker, mpi4py, submitit, pydantic, torch; print("imports ok: torch", torch.__version__, "cuda", torch.cuda.is_available())' || exit 1
limit=${LIMIT:-540}  # seconds for the comparison itself
timeout $limit $PY -m benchmarks.gpu_check "$OUT" "$MODEL" "$DIR" "${WRITES:-1}"; rc=$?
echo "gpu_check rc=$rc"
rm -rf "$DIR"
ls "$OUT"
exit $rc
