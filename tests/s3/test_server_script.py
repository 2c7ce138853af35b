"""scripts/s3-local-server.sh: up binds 127.0.0.1 only, refuses wrong credentials, writes a 0600 env file, is a
no-op when up; status says what a cold read means; down stops it by PID. Every Slurm node reaches it."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.s3.server import Server, ensure_server, read_env, script

pytestmark = pytest.mark.s3


def listening(pid: int) -> list[str]:
    """The local addresses the process listens on (TCP)."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3] for line in out.splitlines() if f"pid={pid}," in line]


def test_up_status_down() -> None:
    directory = Path(tempfile.mkdtemp(prefix="s3t-", dir="/tmp"))
    try:
        up = script("up", directory)
        assert up.returncode == 0, up.stdout + up.stderr
        pid = int((directory / "weed.pid").read_text())
        env = read_env(directory)
        addresses = listening(pid)
        assert addresses and all(a.startswith("127.0.0.1:") for a in addresses), addresses
        assert f"127.0.0.1:{env['STUDYCTL_S3_ENDPOINT'].rsplit(':', 1)[1]}" in addresses
        for name in ("env", "identity.json"):
            assert (directory / name).stat().st_mode & 0o777 == 0o600, name
        again = script("up", directory)
        assert again.returncode == 0 and "already up" in again.stdout
        assert int((directory / "weed.pid").read_text()) == pid
        status = script("status", directory)
        assert status.returncode == 0 and f"pid {pid}" in status.stdout and "cold reads" in status.stdout
        for text in (up.stdout + up.stderr, again.stdout, status.stdout, (directory / "weed.log").read_text()):
            assert env["AWS_SECRET_ACCESS_KEY"] not in text
        down = script("down", directory)
        assert down.returncode == 0
        assert not Path(f"/proc/{pid}").exists()
        assert script("status", directory).returncode == 3
        assert script("down", directory).returncode == 0  # down twice: a no-op
        restarted = ensure_server(directory)  # the key pair made once is kept
        assert restarted.exports["AWS_ACCESS_KEY_ID"] == env["AWS_ACCESS_KEY_ID"]
    finally:
        script("down", directory)
        subprocess.run(["rm", "-rf", str(directory)], check=False)


@pytest.mark.slurm
def test_every_slurm_node_reaches_the_server(s3_server: Server) -> None:
    port = s3_server.endpoint.rsplit(":", 1)[1]
    nodes = subprocess.run(["sinfo", "-h", "-o", "%D"], capture_output=True, text=True, check=True).stdout.split()
    count = int(nodes[0])
    probe = f'exec 3<>/dev/tcp/127.0.0.1/{port} && echo "$SLURMD_NODENAME ok"'
    out = subprocess.run(["srun", "-N", str(count), "-n", str(count), "bash", "-c", probe], capture_output=True,
                         text=True, timeout=120, cwd=tempfile.gettempdir(), env=os.environ.copy())
    assert out.returncode == 0, out.stderr
    assert len(set(re.findall(r"^(\S+) ok$", out.stdout, re.M))) == count
