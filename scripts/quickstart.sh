#!/usr/bin/env bash
# The main job: a small study on the local backend (MPI ranks on this machine), then the report.
# Ends by printing the report and plot paths.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup-env.sh
# With no argument: the buffered vs O_DIRECT study (its report states direct / buffered with a 95% CI), then
# what checkpoint strategies cost training (sync/async/tiered: sweeps/quickstart-strategies.yaml). Or the
# sweeps given.
run() {
  local sweep=$1 study; shift
  study=$(python -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["study"])' "$sweep")
  studyctl plan "$sweep" --limit 10
  studyctl sweep submit "$sweep"
  studyctl collect "$study" "$@"
}
if [[ $# -eq 0 ]]; then
  run sweeps/quickstart.yaml --ratio io_mode=buffered
  run sweeps/quickstart-strategies.yaml
else
  for sweep in "$@"; do run "$sweep"; done
fi
