"""The worker's S3 write and read against the best S3 client driven directly, on the same bytes and concurrency.

The worker runs one point on the project's SeaweedFS (one rank under mpiexec: its DLIO files of a real layout,
`part_mib` parts, `s3_concurrency` in flight, `writes` checkpoints then `reads` restores) and its rate is the
rank's bytes / its own phase durations, summed over checkpoints. Then each client of `benchmarks.s3_clients`
(boto3/s3transfer, obstore, s3dlio, studyctl's ObjectClient) writes and reads objects of exactly those sizes with
the same part size and concurrency, the same number of times, from one process. Printed: MiB/s of each, and the
worker's ratio to the best client driven directly (target ≥ 0.9). `python -m benchmarks s3_worker [rounds]`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from benchmarks.s3_clients import Shape, Studyctl, available, timed
from studyctl.definition.checkpoint.layout import rank_files
from studyctl.definition.checkpoint.points import CheckpointOptions, Point, WorkerTask
from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.inputs.filesystems import ObjectStoreSpec
from studyctl.definition.result.result_schema import Result
from studyctl.objstore.client import ObjectClient
from studyctl.objstore.target import S3Target
from studyctl.units import MIB

PART_MIB, CONCURRENCY, CHECKPOINTS = 16, 4, 3


def worker_rates(endpoint: str, scale: float) -> tuple[list[int], float, float]:
    """(the rank's file sizes, write MiB/s, read MiB/s) of one worker point."""
    point = Point(model=lookup("gpt2-125m"), zero_stage=1, filesystem="s3",
                  checkpoint=CheckpointOptions(scale=scale, writes=CHECKPOINTS, reads=CHECKPOINTS, buffer_mib=64,
                                               part_mib=PART_MIB, s3_concurrency=CONCURRENCY))
    with tempfile.TemporaryDirectory() as tmp:
        task = WorkerTask(study="bench", point_id=point.point_id, point=point, data_key=uuid.uuid4().hex[:8],
                          filesystem_path="s3://studyctl/benchmarks", filesystem_kind="s3",
                          object_store=ObjectStoreSpec(endpoint=endpoint), result_path=f"{tmp}/result.json",
                          error_path=f"{tmp}/error.json")
        path = Path(tmp) / "task.json"
        path.write_text(task.model_dump_json())
        mpiexec = str(Path(sys.executable).parent / "mpiexec")
        subprocess.run([mpiexec, "-n", "1", sys.executable, "-m", "worker", str(path)], check=True)
        result = Result.model_validate_json(Path(task.result_path).read_text())
    rates = {}
    for phase in ("write", "read"):
        mine = [c for c in result.checkpoints if c.phase == phase]
        rates[phase] = sum(c.bytes for c in mine) / MIB / sum(c.duration_max_s for c in mine)
    sizes = [f.nbytes for f in rank_files(point.model, point.parallelism, 0, scale)]
    return sizes, rates["write"], rates["read"]


def direct_rates(endpoint: str, sizes: list[int]) -> dict[str, dict[str, float]]:
    """Per client: MiB/s writing and reading objects of `sizes`, CHECKPOINTS times, as the worker did."""
    target = S3Target("studyctl", "benchmarks", endpoint)
    clients, missing = available(target, Shape(part_mib=PART_MIB, concurrency=CONCURRENCY))
    for line in missing:
        print(f"# {line}")
    payload = os.urandom(max(sizes))
    into = memoryview(bytearray(max(sizes)))
    run = uuid.uuid4().hex[:8]
    total = sum(sizes) * CHECKPOINTS
    out: dict[str, dict[str, float]] = {}
    cleaner = ObjectClient(target, 1, PART_MIB * MIB)
    try:
        for client in clients:
            keys = [(target.key(f"direct-{run}/{c}/{i}"), n) for c in range(CHECKPOINTS) for i, n in enumerate(sizes)]
            write, _ = timed(lambda c=client, k=keys: [c.write(key, payload[:n]) for key, n in k], total)
            read, _ = timed(lambda c=client, k=keys: [c.read(key, into[:n]) for key, n in k], total)
            out[client.name] = {"write": write, "read": read}
            cleaner.delete_prefix(target.key(f"direct-{run}"))
    finally:
        cleaner.close()
    return out


def main(rounds: int = 3, scale: float = 0.1) -> None:
    from tests.s3.server import ensure_server

    server = ensure_server()
    os.environ.update(server.exports)
    worker: dict[str, list[float]] = {"write": [], "read": []}
    direct: dict[str, dict[str, list[float]]] = {}
    sizes: list[int] = []
    for _ in range(rounds):  # worker and clients in turn, so a slow spell of the machine hits both
        sizes, write, read = worker_rates(server.endpoint, scale)
        worker["write"].append(write)
        worker["read"].append(read)
        for name, rates in direct_rates(server.endpoint, sizes).items():
            for phase, rate in rates.items():
                direct.setdefault(name, {}).setdefault(phase, []).append(rate)
    print(f"## The worker's S3 I/O vs clients driven directly: one rank, {len(sizes)} objects of "
          f"{', '.join(f'{n / MIB:.0f}' for n in sizes)} MiB × {CHECKPOINTS} checkpoints, {PART_MIB} MiB parts, "
          f"{CONCURRENCY} in flight, median of {rounds} rounds")
    print("| | write MiB/s | read MiB/s |\n|---|---:|---:|")
    med = {name: {p: statistics.median(v) for p, v in per.items()} for name, per in direct.items()}
    print(f"| worker (studyctl point) | {statistics.median(worker['write']):.0f} | "
          f"{statistics.median(worker['read']):.0f} |")
    for name, rates in med.items():
        print(f"| {name} direct | {rates['write']:.0f} | {rates['read']:.0f} |")
    for phase in ("write", "read"):
        best = max((n for n in med if n != Studyctl.name), key=lambda n: med[n][phase])
        mine = statistics.median(worker[phase])
        own = f"; worker / studyctl's ObjectClient direct = {mine / med[Studyctl.name][phase]:.2f} (the worker's own " \
              "overhead)" if Studyctl.name in med else ""
        print(f"# {phase}: worker / best direct ({best}) = {mine / med[best][phase]:.2f}{own}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
