"""submitit's result pickles are read as plain data: one left in a study directory by someone else runs nothing."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from submitit.core.utils import cloudpickle_dump

from studyctl.backends.slurm.verdict import submitit_error


class Bomb:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def test_a_malicious_result_pickle_is_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    (tmp_path / "7_0_result.pkl").write_bytes(pickle.dumps(("error", Bomb(marker))))
    assert submitit_error(tmp_path, "7") is None and not marker.exists()
    (tmp_path / "8_0_result.pkl").write_bytes(pickle.dumps(Bomb(marker)))
    assert submitit_error(tmp_path, "8") is None and not marker.exists()


def test_submitits_own_error_pickle_still_gives_the_traceback(tmp_path: Path) -> None:
    trace = "Traceback (most recent call last):\nOSError: [Errno 5] EIO"
    cloudpickle_dump(("error", trace), tmp_path / "9_0_result.pkl")
    assert submitit_error(tmp_path, "9") == trace
    cloudpickle_dump(("success", None), tmp_path / "10_0_result.pkl")
    assert submitit_error(tmp_path, "10") is None
