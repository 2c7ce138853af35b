#!/usr/bin/env bash
# The main job: a small study on the local backend (MPI ranks on this machine), then the report.
# Ends by printing the report and plot paths.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup-env.sh
SWEEP=${1:-sweeps/quickstart.yaml}
study=$(python -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["study"])' "$SWEEP")
studyctl plan "$SWEEP" --limit 10
studyctl sweep submit "$SWEEP"
studyctl collect "$study"
