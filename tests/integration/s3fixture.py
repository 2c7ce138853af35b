"""Stand-in for s3core's `s3_server` fixture (same names) until it is merged: the running project server."""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DIR = Path(os.environ.get("STUDYCTL_S3_DIR", "/tmp/studyctl-s3"))
SCRIPT = ROOT / "scripts" / "s3-local-server.sh"


@dataclass
class Server:
    endpoint: str
    env: dict[str, str]
    secret: str

    def stop(self) -> None:
        subprocess.run(["bash", str(SCRIPT), "down"], check=True, capture_output=True)

    def start(self) -> None:
        subprocess.run(["bash", str(SCRIPT), "up"], check=True, capture_output=True)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[Server]:
    if not (DIR / "env").exists():
        subprocess.run(["bash", str(SCRIPT), "up"], check=True, capture_output=True)
    words = shlex.split((DIR / "env").read_text().replace("export", ""))
    pairs = dict(w.split("=", 1) for w in words if "=" in w)
    os.environ.update(pairs)
    yield Server(pairs["STUDYCTL_S3_ENDPOINT"], dict(os.environ), pairs["AWS_SECRET_ACCESS_KEY"])
