"""What a named limit says for one cell: each rule's evidence as a sentence a user can check against the tables
(figures with their 95% intervals where they have one), and what differs where the probe fell short."""

from __future__ import annotations

import math

from studyctl.analysis.hardware.limit_conditions import calls_text, cell_and_probe, per_file_fsync, time_text
from studyctl.analysis.hardware.limit_facts import CellFacts, known, pct_ci, share
from studyctl.units import GIB, format_bytes


def method(c: CellFacts) -> str:
    return {"direct": "O_DIRECT", "fadvise": "buffered (fadvise-evicted)"}.get(c.ceiling_method or "",
                                                                             c.ceiling_method or "?")


# --- page cache -------------------------------------------------------------------------------------------------------

def unsynced(c: CellFacts) -> str:
    return "buffered write without fsync: in memory, not durable yet"


def resident(c: CellFacts) -> str:
    return (f"{c.resident_pages_before:,.0f} of {c.pages_sampled:,.0f} sampled pages "
            f"({c.resident_pages_before / c.pages_sampled:.1%}) of its files were in the page cache right before "
            "the read: served (in part) from memory, not storage")


def warm(c: CellFacts) -> str:
    return "warm restore (no cold read): served from memory, not storage"


def above_cold(c: CellFacts) -> str:
    return (f"restore at {c.share:.2f}× this shape's cold {method(c)} read probe, beyond both CIs "
            f"({cell_and_probe(c)}), and no residency sample: served from memory, not storage")


def probe_short(c: CellFacts) -> str:
    """What differs between the probe and the checkpoint, stated, not explained: files, sizes, method."""
    verb = "writes and fsyncs" if c.phase == "write" else "reads back"
    probe = (f"the probe {verb} one file of {format_bytes(c.probe_bytes_per_rank, 1)} per rank"
             if known(c.probe_bytes_per_rank) else f"the probe {verb} one file per rank (the largest shard)")
    if c.world_size:
        probe += f" ({c.world_size} files)"
    files = (f"the checkpoint {c.files:,.0f} files of {format_bytes(c.bytes_per_file, 1)} on average"
             if known(c.files) and known(c.bytes_per_file) else "the checkpoint its own files")
    how = f"; both {method(c)}" if c.phase == "read" else f"; both {c.io_mode_used}"
    return (f"the probe did not reach this shape's ceiling: the cell at {c.share:.2f}× its figure, beyond both CIs "
            f"({cell_and_probe(c)}); {probe}, {files}{how}: the checkpoint's pattern streams faster here than the "
            "probe's")


# --- framework --------------------------------------------------------------------------------------------------------

def _framework_work(c: CellFacts) -> str:
    """"torch.save's serialization and device-to-host copy": what the engine does besides moving the bytes."""
    write = c.phase == "write"
    name = "DCP" if c.engine == "dcp" else ("torch.save" if write else "torch.load") if c.engine == "torch_save" \
        else c.engine
    work = (["planning"] if c.engine == "dcp" else []) + ["serialization" if write else "deserialization"]
    if c.device != "cpu":
        work.append("device-to-host copy" if write else "host-to-device copy")
    return f"{name}'s {', '.join(work[:-1])}{' and ' if len(work) > 1 else ''}{work[-1]}"


def framework_ci(c: CellFacts) -> str:
    return "" if math.isnan(c.framework_share_low) else f" [{c.framework_share_low:.0%}, {c.framework_share_high:.0%}]"


def framework(c: CellFacts) -> str:
    twin = (f"stream on the same bytes reaches {c.stream_GiBps:.2f} GiB/s" if known(c.stream_GiBps) else
            "the rest is inside its storage calls (no stream cell on this shape)")
    work = _framework_work(c)
    verb = "take" if " and " in work or ", " in work else "takes"
    return f"{work} {verb} {c.framework_share:.0%}{framework_ci(c)} of the time; {twin}"


# --- storage, tier ----------------------------------------------------------------------------------------------------

def storage(c: CellFacts) -> str:
    above = " (above the one-file-per-rank probe, within the CIs)" if c.share > 1 else ""
    return f"{pct_ci(c.share, c.share_low, c.share_high)} of this shape's streaming ceiling{above}"


def tier(c: CellFacts) -> str:
    path = "every byte written to the node-local tier, read back and written again to shared storage"
    if math.isnan(c.share):  # no ceiling for the shape (ceilings off, or not measured yet): no share to give
        return f"{path} (no streaming ceiling measured for this shape, so no share of it)"
    return f"{pct_ci(c.share, c.share_low, c.share_high)} of this shape's streaming ceiling to durable: {path}"


# --- imbalance --------------------------------------------------------------------------------------------------------

def imbalance(c: CellFacts) -> str:
    even = c.even_share * c.bytes_max_over_mean
    verb = "writes" if c.phase == "write" else "reads"
    why = f" ({c.heavy_rank_files})" if c.heavy_rank_files else ""
    reach = f"{even:.2f} of the ceiling" if even < 1 else "the ceiling"
    time = "" if math.isnan(c.heaviest_time_over_mean) else f", {time_text(c)}"
    return (f"the heaviest rank {verb} {c.bytes_max_over_mean:.2f}× the mean bytes{why}{time} — even ranks would "
            f"reach {reach}")


# --- metadata and per-file cost --------------------------------------------------------------------------------------

def metadata(c: CellFacts) -> str:
    doing = ("creating, fsyncing and closing" if per_file_fsync(c) else
             "creating and closing" if c.phase == "write" else "opening and closing")
    files = f"its {c.slowest_files:,.0f} files" if not math.isnan(c.slowest_files) else "its files"
    detail = ([f"{c.files:,.0f} per checkpoint"] if not math.isnan(c.files) else []) + \
        ([f"{format_bytes(c.bytes_per_file, 1)} each on average"] if known(c.bytes_per_file) else [])
    tail = f" ({', '.join(detail)})" if detail else ""
    return f"{calls_text(c)} of the slowest rank's time in {doing} {files}{tail}"


def per_file(c: CellFacts) -> str:
    seconds = c.bytes_per_file * c.files / GIB / c.GiBps
    at_ceiling = seconds * c.share
    each = (seconds - at_ceiling) / c.slowest_files
    return (f"its {c.files:,.0f} files average {format_bytes(c.bytes_per_file, 1)}: at this shape's ceiling their "
            f"bytes take {at_ceiling:.3g} s of the {seconds:.3g} s per checkpoint; the other "
            f"{seconds - at_ceiling:.3g} s are {each * 1e3:.3g} ms per file over the slowest rank's "
            f"{c.slowest_files:,.0f} files: a cost per file (opening, each request's latency, closing), not transfer "
            f"({pct_ci(c.share, c.share_low, c.share_high)} of the ceiling)")


# --- network and memory -----------------------------------------------------------------------------------------------

def network(c: CellFacts) -> str:
    return (f"broadcast at {share(c.broadcast_GiBps, c.bcast_ceiling_GiBps):.0%} of MPI bandwidth "
            f"({c.broadcast_time_share:.0%} of the restore's time)")


def memory(c: CellFacts) -> str:
    s = share(c.snapshot_GiBps_per_rank, c.memcpy_ceiling_GiBps_per_rank)
    return f"the async snapshot copies at {s:.0%} of the host memory-copy ceiling per rank"

