"""The project's S3 server for tests and benchmarks: started with scripts/s3-local-server.sh when it is down,
its endpoint and credentials read from the env file the script writes."""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "s3-local-server.sh"
BUCKET = "studyctl"


def server_dir() -> Path:
    return Path(os.environ.get("STUDYCTL_S3_DIR", "/tmp/studyctl-s3"))


def read_env(directory: Path) -> dict[str, str]:
    """The `export NAME=value ...` line of the script's env file as a dict."""
    words = shlex.split((directory / "env").read_text())
    return dict(w.split("=", 1) for w in words if "=" in w)


@dataclass(frozen=True)
class Server:
    directory: Path
    env: dict[str, str]

    @property
    def endpoint(self) -> str:
        return self.env["STUDYCTL_S3_ENDPOINT"]

    @property
    def secret(self) -> str:
        return self.env["AWS_SECRET_ACCESS_KEY"]


def script(command: str, directory: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({"STUDYCTL_S3_DIR": str(directory)} if directory else {})}
    return subprocess.run(["bash", str(SCRIPT), command], env=env, capture_output=True, text=True, timeout=timeout)


def ensure_server(directory: Path | None = None) -> Server:
    """The server in `directory` (default: the project's), started when it is not up."""
    directory = directory or server_dir()
    up = script("up", directory)
    if up.returncode:
        raise RuntimeError(f"s3-local-server.sh up failed:\n{up.stdout}{up.stderr}")
    return Server(directory, read_env(directory))
