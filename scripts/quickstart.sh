#!/usr/bin/env bash
# The main job: a small study on the local backend (MPI ranks on this machine), then the report.
# Ends by printing the report and plot paths.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup-env.sh
# With no argument: the scaling study, then what checkpoint strategies cost training (sync/async/tiered,
# rank/broadcast restore: sweeps/quickstart-strategies.yaml, half a minute more). Or the sweeps given.
[[ $# -gt 0 ]] || set -- sweeps/quickstart.yaml sweeps/quickstart-strategies.yaml
for sweep in "$@"; do
  study=$(python -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["study"])' "$sweep")
  studyctl plan "$sweep" --limit 10
  studyctl sweep submit "$sweep"
  studyctl collect "$study"
done
