"""The project's S3 server for tests and benchmarks: started with scripts/s3-local-server.sh when it is down,
its endpoint and credentials read from the env file the script writes. Fixtures (registered in tests/conftest.py):

  s3_server          the project's server (session): its credentials in os.environ for the session
  s3_private_server  a server of its own (own directory, ports and key pair), for a test that stops it
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from studyctl.objstore.cache import read_env, server_dir

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "s3-local-server.sh"
BUCKET = "studyctl"


def script(command: str, directory: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({"STUDYCTL_S3_DIR": str(directory)} if directory else {})}
    return subprocess.run(["bash", str(SCRIPT), command], env=env, capture_output=True, text=True, timeout=timeout)


@dataclass
class Server:
    directory: Path
    exports: dict[str, str]  # what the env file exports: AWS_* and STUDYCTL_S3_ENDPOINT

    @property
    def endpoint(self) -> str:
        return self.exports["STUDYCTL_S3_ENDPOINT"]

    @property
    def secret(self) -> str:
        return self.exports["AWS_SECRET_ACCESS_KEY"]

    @property
    def env(self) -> dict[str, str]:
        """os.environ with this server's credentials and endpoint: for subprocesses (studyctl, mpiexec)."""
        return {**os.environ, **self.exports}

    def stop(self) -> None:
        """Stops the server (by PID, as `down` does). On the shared `s3_server` this stops it for everyone
        using it: a test that stops a server takes `s3_private_server`."""
        down = script("down", self.directory)
        if down.returncode:
            raise RuntimeError(f"s3-local-server.sh down failed:\n{down.stdout}{down.stderr}")

    def pause(self) -> None:
        """SIGSTOP to the server: it keeps its sockets (connections are accepted) but answers nothing, as a store
        that hangs does. `resume` (SIGCONT) undoes it."""
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    @property
    def pid(self) -> int:
        return int((self.directory / "weed.pid").read_text())

    def start(self) -> None:
        """Starts it again (the same key pair; the port may differ: `endpoint` follows it)."""
        self.exports = ensure_server(self.directory).exports


def ensure_server(directory: Path | None = None) -> Server:
    """The server in `directory` (default: the project's), started when it is not up."""
    directory = directory or server_dir()
    up = script("up", directory)
    if up.returncode:
        raise RuntimeError(f"s3-local-server.sh up failed:\n{up.stdout}{up.stderr}")
    return Server(directory, read_env(directory))


@pytest.fixture(scope="session")
def s3_server() -> Iterator[Server]:
    """The project's server, started when down (CI starts from a clean clone), its credentials in os.environ
    for the session: the standard chain is the only way a client gets them. Left running at the end (other
    sessions may share it); scripts/test.sh stops what it started."""
    server = ensure_server()
    before = {k: os.environ.get(k) for k in server.exports}
    os.environ.update(server.exports)
    yield server
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def s3_private_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    """A server of its own for one test (its credentials in os.environ for the test), stopped and removed after."""
    directory = Path(tempfile.mkdtemp(prefix="s3t-", dir="/tmp"))  # short: weed's unix sockets live there
    try:
        server = ensure_server(directory)
        for name, value in server.exports.items():
            monkeypatch.setenv(name, value)
        yield server
    finally:
        with contextlib.suppress(OSError, ValueError):  # a test that paused it and failed: resumed for `down`
            os.kill(int((directory / "weed.pid").read_text()), signal.SIGCONT)
        script("down", directory)
        shutil.rmtree(directory, ignore_errors=True)
