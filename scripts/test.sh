#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine (as root): venv and packages, Debian packages the
# tests use (fio, chromium), a real four-node Slurm cluster and the project's S3 server (SeaweedFS) on this
# machine, then mypy and pytest; what it started it stops at the end.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k sweep`.
set -euo pipefail
cd "$(dirname "$0")/.."
export STUDYCTL_WITH_TORCH=1  # every engine path runs in the suite, on host tensors
source scripts/setup-env.sh

missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v fio >/dev/null || missing+=(fio)
if ((${#missing[@]})); then
  echo "installing ${missing[*]} (Debian packages the tests use)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 update -qq
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

started_cluster=0
started_s3=0
cleanup() {
  ((started_s3)) && bash scripts/s3-local-server.sh down || true
  ((started_cluster)) && bash scripts/slurm-local-cluster.sh down || true
}
trap cleanup EXIT
if ! scontrol ping 2>/dev/null | grep -q UP; then
  started_cluster=1
  bash scripts/slurm-local-cluster.sh up
fi
if ! bash scripts/s3-local-server.sh status >/dev/null; then
  started_s3=1
  bash scripts/s3-local-server.sh up
fi

echo "mypy (types, config in pyproject.toml)"
python -m mypy

set +e
python -m pytest "$@"
rc=$?
set -e
if ((rc == 5)); then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit $rc
