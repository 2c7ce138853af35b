"""Worker memory stays bounded: peak RSS per rank for checkpoints 1×, 10× and 100× the buffer.

Target: the 10× and 100× cases within 1.2× of the 1× case (the one reused buffer is all the data memory).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from studyctl.definition.checkpoint.layout import summarize
from studyctl.definition.checkpoint.points import CheckpointOptions, Point, WorkerTask
from studyctl.definition.inputs.catalog import lookup
from studyctl.units import MIB

MPIEXEC = str(Path(sys.executable).parent / "mpiexec")
PROBE = str(Path(__file__).with_name("_rss_probe.py"))
BUFFER_MIB = 16


def peak_rss_kib(root: Path, multiple: int, ranks: int = 2) -> list[int]:
    model = lookup("gpt2-1.5b")
    probe = Point(model=model, zero_stage=3, ranks_per_node=ranks, filesystem="m")
    full = summarize(model, probe.parallelism).bytes_per_rank_max
    scale = min(1.0, multiple * BUFFER_MIB * MIB / full)
    point = Point(model=model, zero_stage=3, ranks_per_node=ranks, filesystem="m", io_mode="direct",
                  checkpoint=CheckpointOptions(writes=1, reads=1, scale=scale, buffer_mib=BUFFER_MIB, block_mib=4))
    task = WorkerTask(study="mem", point_id=point.point_id, point=point, filesystem_path=str(root / "data"),
                      result_path=str(root / "result.json"), error_path=str(root / "error.json"))
    path = root / f"task-{multiple}.json"
    path.write_text(task.model_dump_json())
    out = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, PROBE, str(path)], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(repeat: int = 5) -> int:
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        root = Path(tmp)
        peaks = {m: [max(peak_rss_kib(root, m)) for _ in range(repeat)] for m in (1, 10, 100)}
    base = statistics.median(peaks[1])
    for m, values in peaks.items():
        ratios = [v / base for v in values]
        print(f"worker peak RSS/rank, checkpoint {m:>3}× buffer ({m * BUFFER_MIB} MiB/rank): median "
              f"{statistics.median(values) / 1024:6.1f} MiB  ratio to 1×: median {statistics.median(ratios):.3f} "
              f"min {min(ratios):.3f} max {max(ratios):.3f}  target <= 1.2  "
              f"{'ok' if statistics.median(ratios) <= 1.2 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
