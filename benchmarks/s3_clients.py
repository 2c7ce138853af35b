"""S3 clients side by side on the project's SeaweedFS: the same objects, sizes, part size and concurrency.

Each client is driven directly (its own multipart and ranged-read machinery), then studyctl's ObjectClient:
  boto3     s3transfer's upload_fileobj/download_fileobj (TransferConfig: part size, max_concurrency)
  obstore   obstore.put (chunk_size, max_concurrency) and get_range_async per part, `concurrency` at once
(boto3, obstore and studyctl send UNSIGNED-PAYLOAD: no SHA-256 pass over the bytes; s3dlio its defaults)
  s3dlio    MultipartUploadWriter (part_size, max_in_flight) and get_range per part on `concurrency` threads
  studyctl  ObjectClient.put / ObjectClient.get (what the worker calls)
Write: every object of the round put; read: every object read back into one preallocated buffer (the server's
page cache is warm for every client alike: the clients are compared, not the disk). Rounds rotate the order of
the clients; figures are medians over rounds, MiB/s of payload, and this process's CPU seconds per GiB (all its
threads: the server's CPU is not in it). `python -m benchmarks s3_clients [rounds]` (starts the server when it
is down; not in `all`). For a ratio of the worker to the best client driven directly, measured beside it:
`best_direct(medians(measure(target, Shape(...), rounds)), "write" | "read")` → (client, MiB/s).
"""

from __future__ import annotations

import asyncio
import io
import os
import statistics
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from studyctl.objstore.calls import boto_client
from studyctl.objstore.client import ObjectClient, spans
from studyctl.objstore.counts import RequestCounts
from studyctl.objstore.target import S3Target
from studyctl.units import MIB

PHASES = ("write", "read", "write_cpu", "read_cpu")


@dataclass(frozen=True)
class Shape:
    objects: int = 4
    object_mib: int = 64
    part_mib: int = 16
    concurrency: int = 4

    @property
    def part(self) -> int:
        return self.part_mib * MIB

    @property
    def size(self) -> int:
        return self.object_mib * MIB


class Boto3:
    name = "boto3"

    def __init__(self, target: S3Target, shape: Shape) -> None:
        from boto3.s3.transfer import TransferConfig

        self.target, self.client = target, boto_client(target, shape.concurrency)
        self.config = TransferConfig(multipart_threshold=shape.part + 1, multipart_chunksize=shape.part,
                                     max_concurrency=shape.concurrency, use_threads=shape.concurrency > 1)

    def write(self, key: str, data: bytes) -> None:
        self.client.upload_fileobj(io.BytesIO(data), self.target.bucket, key, Config=self.config)

    def read(self, key: str, into: memoryview) -> None:
        self.client.download_fileobj(self.target.bucket, key, _Sink(into), Config=self.config)


class Obstore:
    name = "obstore"

    def __init__(self, target: S3Target, shape: Shape) -> None:
        from obstore.store import S3Store

        self.shape = shape
        self.store = S3Store(target.bucket, endpoint=target.endpoint, region=target.region,
                             access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                             secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
                             virtual_hosted_style_request=target.addressing == "virtual",
                             unsigned_payload=True,  # as studyctl's and boto3's clients here: no SHA-256 pass
                             client_options={"allow_http": True})

    def write(self, key: str, data: bytes) -> None:
        import obstore

        obstore.put(self.store, key, data, chunk_size=self.shape.part, max_concurrency=self.shape.concurrency)

    def read(self, key: str, into: memoryview) -> None:
        asyncio.run(self._read(key, into))

    async def _read(self, key: str, into: memoryview) -> None:
        import obstore

        gate = asyncio.Semaphore(self.shape.concurrency)

        async def one(offset: int, length: int) -> None:
            async with gate:
                got = await obstore.get_range_async(self.store, key, start=offset, length=length)
            into[offset:offset + length] = memoryview(got)

        await asyncio.gather(*(one(o, n) for _, o, n in spans(len(into), self.shape.part)))


class S3dlio:
    name = "s3dlio"

    def __init__(self, target: S3Target, shape: Shape) -> None:
        import s3dlio

        os.environ.setdefault("AWS_ENDPOINT_URL", target.endpoint or "")
        s3dlio.configure_s3(endpoint_url=target.endpoint, region=target.region)
        self.target, self.shape, self.s3 = target, shape, s3dlio
        self.pool = ThreadPoolExecutor(shape.concurrency)

    def write(self, key: str, data: bytes) -> None:
        if len(data) <= self.shape.part:
            self.s3.put_bytes(f"s3://{self.target.bucket}/{key}", data)
            return
        writer = self.s3.MultipartUploadWriter(self.target.bucket, key, part_size=self.shape.part,
                                               max_in_flight=self.shape.concurrency)
        writer.write(data)
        writer.close()

    def read(self, key: str, into: memoryview) -> None:
        uri = f"s3://{self.target.bucket}/{key}"

        def one(offset: int, length: int) -> None:
            into[offset:offset + length] = memoryview(self.s3.get_range(uri, offset, length))

        list(self.pool.map(lambda s: one(s[1], s[2]), spans(len(into), self.shape.part)))


class Studyctl:
    name = "studyctl"

    def __init__(self, target: S3Target, shape: Shape) -> None:
        self.client = ObjectClient(target, shape.concurrency, shape.part)
        self.counts = RequestCounts()

    def write(self, key: str, data: bytes) -> None:
        self.client.put(key, memoryview(data), self.counts)

    def read(self, key: str, into: memoryview) -> None:
        self.client.get(key, into, 0, self.counts)


CLIENTS: tuple[type[Any], ...] = (Boto3, Obstore, S3dlio, Studyctl)


class _Sink(io.RawIOBase):
    """A seekable file that writes into a preallocated buffer (s3transfer writes parts out of order)."""

    def __init__(self, into: memoryview) -> None:
        self.into, self.pos = into, 0

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else len(self.into) + offset
        return self.pos

    def tell(self) -> int:
        return self.pos

    def write(self, data: Any) -> int:
        n = len(data)
        self.into[self.pos:self.pos + n] = data
        self.pos += n
        return n


def available(target: S3Target, shape: Shape) -> tuple[list[Any], list[str]]:
    """The clients that import and work here, and a line for each one that does not."""
    clients, missing = [], []
    for kind in CLIENTS:
        try:
            clients.append(kind(target, shape))
        except ImportError as error:
            missing.append(f"{kind.name}: not installed ({error.name})")
    return clients, missing


def timed(action: Callable[[], None], nbytes: int) -> tuple[float, float]:
    """(MiB/s, this process's CPU seconds per GiB: every thread, the clients' native ones included)."""
    t0, c0 = time.perf_counter(), time.process_time()
    action()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return nbytes / MIB / wall, cpu / (nbytes / (1 << 30))


def measure(target: S3Target, shape: Shape, rounds: int) -> dict[str, dict[str, list[float]]]:
    """{client: {"write": MiB/s, "read": MiB/s, "write_cpu": s/GiB, "read_cpu": s/GiB}}, one value per round
    (clients in rotated order)."""
    clients, missing = available(target, shape)
    for line in missing:
        print(f"# {line}")
    payload = os.urandom(shape.size)
    into = memoryview(bytearray(shape.size))
    run = uuid.uuid4().hex[:8]
    keys = [target.key(f"bench-{run}/obj-{i}") for i in range(shape.objects)]
    total = shape.size * shape.objects
    rates: dict[str, dict[str, list[float]]] = {c.name: {k: [] for k in PHASES} for c in clients}
    cleaner = ObjectClient(target, 1, shape.part)
    try:
        for r in range(rounds):
            order = clients[r % len(clients):] + clients[:r % len(clients)]
            for client in order:  # each writes the shared keys, then reads them back
                for phase, action in (("write", lambda c=client: [c.write(k, payload) for k in keys]),
                                      ("read", lambda c=client: [c.read(k, into) for k in keys])):
                    rate, cpu = timed(action, total)
                    rates[client.name][phase].append(rate)
                    rates[client.name][f"{phase}_cpu"].append(cpu)
                if bytes(into) != payload:
                    raise AssertionError(f"{client.name}: the bytes read differ from those written")
    finally:
        cleaner.delete_prefix(target.key(f"bench-{run}"))
        cleaner.close()
    return rates


def medians(rates: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    return {name: {phase: statistics.median(v) for phase, v in per.items()} for name, per in rates.items()}


def paired(rates: dict[str, dict[str, list[float]]], phase: str) -> list[float]:
    """Per round: studyctl's rate over the best direct client's in that same round (back to back)."""
    direct = [n for n in rates if n != Studyctl.name]
    rounds = range(len(rates[Studyctl.name][phase]))
    return [rates[Studyctl.name][phase][r] / max(rates[n][phase][r] for n in direct) for r in rounds]


def best_direct(rates: dict[str, dict[str, float]], phase: str) -> tuple[str, float]:
    """The fastest client driven directly (studyctl's own excluded) in `phase`: (name, MiB/s)."""
    name = max((n for n in rates if n != Studyctl.name), key=lambda n: rates[n][phase])
    return name, rates[name][phase]


def report(raw: dict[str, dict[str, list[float]]], shape: Shape, rounds: int) -> None:
    rates = medians(raw)
    print(f"## S3 clients: {shape.objects} objects x {shape.object_mib} MiB, {shape.part_mib} MiB parts, "
          f"{shape.concurrency} in flight, median of {rounds} rounds")
    ref = rates.get(Boto3.name)
    print("| client | write MiB/s | read MiB/s | write / boto3 | read / boto3 | client CPU s/GiB write | read |")
    print("|---|---|---|---|---|---|---|")
    for name, r in rates.items():
        ratios = (f"{r['write'] / ref['write']:.2f} | {r['read'] / ref['read']:.2f}" if ref else "- | -")
        cpu = f"{r['write_cpu']:.2f} | {r['read_cpu']:.2f}"
        print(f"| {name} | {r['write']:.0f} | {r['read']:.0f} | {ratios} | {cpu} |")
    for phase in ("write", "read"):
        best, rate = best_direct(rates, phase)
        if Studyctl.name in rates:
            per_round = paired(raw, phase)
            print(f"# {phase}: studyctl ObjectClient / best direct ({best}) = "
                  f"{rates[Studyctl.name][phase] / rate:.2f} of the medians; per round, to that round's best: "
                  f"median {statistics.median(per_round):.2f} (min {min(per_round):.2f}, max {max(per_round):.2f})")


# multipart objects (several parts each, `concurrency` in flight), then objects of one PUT each
SHAPES = (Shape(), Shape(objects=16, object_mib=8))


def main(rounds: int = 3, shapes: tuple[Shape, ...] = SHAPES) -> None:
    from tests.s3.server import BUCKET, ensure_server

    server = ensure_server()
    os.environ.update(server.exports)
    target = S3Target(BUCKET, "benchmarks", server.endpoint)
    for shape in shapes:
        report(measure(target, shape, rounds), shape, rounds)


if __name__ == "__main__":
    import sys

    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
