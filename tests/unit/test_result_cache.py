"""The sharded parse cache: one change rewrites one shard, values come back exactly (NaN and ±inf too), and a
shard that is damaged, misplaced or written for another directory is rebuilt, never trusted."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from studyctl.analysis.cache_values import Split
from studyctl.analysis.result_cache import SHARDS, ParseCache, shard_of

PARSED: list[str] = []


def parse(path: Path) -> dict[str, Any]:
    """A stand-in for a result file's rows: table rows (packed by the cache), pairs, floats, None."""
    PARSED.append(path.name)
    n = int(path.read_text())
    rows = [{"tool": "studyctl", "nodes": n, "phase": p, "bw": n / 3, "none": None} for p in ("write", "read")]
    return {"checkpoints": rows, "ranks": [["write", 0, r, "h", 1 << 20, 0.5 + r, 2.0] for r in range(n)],
            "info": {"n": n, "x": math.pi * n, "odd": float(path.read_text().count("9")) or None}}


def _bulky_parts(value: Any) -> tuple[Any, Any]:
    if isinstance(value, dict) and "bulky" in value:
        return {k: v for k, v in value.items() if k != "bulky"}, value["bulky"]
    return value, None


def _bulky_join(light: Any, bulky: Any) -> None:
    light["bulky"] = bulky


BULKY_SPLIT = Split(_bulky_parts, _bulky_join)


def parse_bulky(path: Path) -> Any:
    """A value with a bulky part (rows, a NaN in one file's), or, for a file holding "x", one without."""
    PARSED.append(path.name)
    text = path.read_text()
    if text == "x":
        return ["refused", "no rows"]
    n = int(text)
    return {"n": n, "info": {"name": path.name},
            "bulky": [{"tool": "studyctl", "rank": r, "bw": n / 7 if n != 5 else math.nan} for r in range(3)]}


def study(tmp_path: Path, n: int = 200) -> Path:
    root = tmp_path / "study"
    (root / "tables" / ".cache").mkdir(parents=True)
    for i in range(n):
        (root / f"f{i}.json").write_text(str(i))
    return root


def collect(root: Path) -> tuple[dict[str, Any], ParseCache]:
    """What a collect reads through the cache: every file's value, and the cache (hits, misses) after saving."""
    PARSED.clear()
    cache = ParseCache(root / "tables" / ".cache" / "results.json", root)
    values = {p.name: cache.get_or_parse(p, p.stat(), parse) for p in sorted(root.glob("f*.json"))}
    cache.save()
    return values, cache


def shard_stamps(root: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (root / "tables" / ".cache").glob("results.*.json")}


def test_values_come_back_exactly_and_one_change_rewrites_one_shard(tmp_path: Path) -> None:
    root = study(tmp_path)
    first, cache = collect(root)
    assert cache.misses == 200 and len(shard_stamps(root)) == SHARDS
    again, cache = collect(root)
    assert again == first and cache.hits == 200 and not PARSED
    head = json.loads((root / "tables" / ".cache" / "results.json").read_text())
    assert head["format"] == "studyctl-results-cache" and head["shards"] == SHARDS
    before = shard_stamps(root)
    changed = root / "f7.json"
    changed.write_text("7 ")
    _, cache = collect(root)
    assert PARSED == ["f7.json"] and cache.hits == 199
    after = shard_stamps(root)
    assert {k for k in after if after[k] != before[k]} == {f"results.{shard_of('f7.json')}.json"}


def test_nan_and_infinity_survive_the_cache(tmp_path: Path) -> None:
    root = study(tmp_path, 3)

    def odd(path: Path) -> dict[str, Any]:
        return {"v": [float("nan"), float("inf"), -float("inf"), 1.5], "name": path.name}

    for _ in range(2):
        cache = ParseCache(root / "tables" / ".cache" / "results.json", root)
        values = [cache.get_or_parse(p, p.stat(), odd) for p in sorted(root.glob("f*.json"))]
        cache.save()
        assert all(math.isnan(v["v"][0]) and v["v"][1:] == [math.inf, -math.inf, 1.5] for v in values)
    assert cache.hits == 3


def test_a_damaged_shard_is_rebuilt_and_the_rest_kept(tmp_path: Path) -> None:
    root = study(tmp_path)
    first, _ = collect(root)
    victim = shard_of("f3.json")
    path = root / "tables" / ".cache" / f"results.{victim}.json"
    in_victim = sorted(k for k in first if shard_of(k) == victim)
    for damage in (path.read_bytes()[:-20], b"[1, 2]", b"{\"format\": 1}"):
        path.write_bytes(damage)
        values, cache = collect(root)
        assert values == first and sorted(PARSED) == in_victim and cache.hits == 200 - len(in_victim)
    _, cache = collect(root)
    assert cache.hits == 200


def test_a_key_in_another_shard_makes_the_shard_untrusted(tmp_path: Path) -> None:
    root = study(tmp_path)
    collect(root)
    victim = shard_of("f3.json")
    path = root / "tables" / ".cache" / f"results.{victim}.json"
    data = json.loads(path.read_bytes())
    stranger = next(f"f{i}.json" for i in range(200) if shard_of(f"f{i}.json") != victim)
    other = json.loads((root / "tables" / ".cache" / f"results.{shard_of(stranger)}.json").read_bytes())
    data["entries"][stranger] = other["entries"][stranger]
    path.write_bytes(json.dumps(data).encode())
    collect(root)
    assert "f3.json" in PARSED and stranger not in PARSED


def test_a_cache_written_for_another_directory_is_ignored(tmp_path: Path) -> None:
    root = study(tmp_path)
    first, _ = collect(root)
    moved = tmp_path / "moved"
    os.rename(root, moved)
    root.mkdir()  # the same path, another directory (a new inode)
    for entry in moved.iterdir():
        os.rename(entry, root / entry.name)
    values, cache = collect(root)
    assert values == first and cache.misses == 200


def test_files_that_disappeared_leave_the_cache(tmp_path: Path) -> None:
    root = study(tmp_path)
    collect(root)
    (root / "f5.json").unlink()
    _, cache = collect(root)
    assert cache.hits == 199
    data = json.loads((root / "tables" / ".cache" / f"results.{shard_of('f5.json')}.json").read_bytes())
    assert "f5.json" not in data["entries"] and len(data["entries"]) > 0


def test_a_fifo_in_place_of_a_shard_is_never_opened_for_blocking(tmp_path: Path) -> None:
    root = study(tmp_path)
    collect(root)
    fifo = root / "tables" / ".cache" / f"results.{shard_of('f3.json')}.json"
    fifo.unlink()
    os.mkfifo(fifo)
    _, cache = collect(root)  # would hang here if the shard were opened for blocking reads
    assert "f3.json" in PARSED and cache.hits < 200 and fifo.is_file()


def test_numpy_scalars_are_cached_as_plain_numbers(tmp_path: Path) -> None:
    import numpy as np

    root = study(tmp_path, 2)

    def numeric(path: Path) -> dict[str, Any]:
        return {"v": [np.float64(2.5), np.float64("nan")], "name": path.name}

    for _ in range(2):
        cache = ParseCache(root / "tables" / ".cache" / "results.json", root)
        values = [cache.get_or_parse(p, p.stat(), numeric) for p in sorted(root.glob("f*.json"))]
        cache.save()
        assert all(v["v"][0] == 2.5 and math.isnan(v["v"][1]) for v in values)
    assert cache.hits == 2


def test_files_parsed_ahead_in_workers_come_back_as_parsed_here(tmp_path: Path, monkeypatch: Any) -> None:
    """A first collect of many files parses them in worker processes: the same values, counted as read, cached;
    a file changed after its worker read it is parsed again here."""
    import studyctl.analysis.result_cache as rc

    monkeypatch.setattr(rc, "AHEAD_MIN", 8)
    monkeypatch.setattr(rc, "AHEAD_CHUNK", 16)
    root = study(tmp_path, 60)
    serial, _ = collect(study(tmp_path / "serial", 60))
    PARSED.clear()
    cache = ParseCache(root / "tables" / ".cache" / "results.json", root)
    files = sorted(root.glob("f*.json"))
    cache.parse_ahead([(p, p.stat(), ()) for p in files], parse)
    assert PARSED == [] and len(cache.ahead) == (60 if len(os.sched_getaffinity(0)) > 1 else 0)
    files[3].write_text("1234")  # changed after the worker read it
    values = {p.name: cache.get_or_parse(p, p.stat(), parse) for p in files}
    cache.save()
    assert cache.misses == 60 and cache.hits == 0
    here = [files[3].name] if len(os.sched_getaffinity(0)) > 1 else [p.name for p in files]
    assert here == PARSED
    assert values == {**serial, files[3].name: parse(files[3])}  # only the changed file was parsed here
    again, cached = collect(root)
    assert cached.hits == 60 and again == values


def test_a_worker_sends_bytes_only_where_reading_them_back_gives_the_value() -> None:
    """A worker's value goes into the shard as orjson's bytes only when they read back as the value packed: NaN,
    ±inf (orjson would write null) and what JSON has no type for cross as the value itself; tuples become the
    lists JSON makes them."""
    import orjson

    from studyctl.analysis.cache_values import portable, unpack

    rows = {"rows": [{"a": 1, "b": 2.5, "c": None}, {"a": 1, "b": 3.5, "c": "x"}],
            "ranks": [(0, "h", 1.5), (1, "h", 2.0)]}
    data, value = portable(rows, None)
    assert value is None and data is not None and data[1] is None
    assert unpack(orjson.loads(data[0])) == {**rows, "ranks": [[0, "h", 1.5], [1, "h", 2.0]]}
    for odd in ({"x": math.nan}, {"x": [1.0, -math.inf]}, {"r": [(1, math.inf)]}, {"x": 1 << 70}, {1: 2},
                {"rows": [{"a": (1, 2)}, {"a": (1, 3)}]}):  # the last: a tuple inside a table's row stays one
        assert portable(odd, None) == (None, odd)
        # split, a part that is not exact sends the value whole
        assert portable({"light": 1, "bulky": odd}, BULKY_SPLIT) == (None, {"light": 1, "bulky": odd})
        assert portable({"light": odd, "bulky": 1}, BULKY_SPLIT) == (None, {"light": odd, "bulky": 1})


def test_the_shared_prefix_of_rows_is_their_leading_equal_columns() -> None:
    """Found in C: the same count as walking each row's columns against the first's (key, value and type)."""
    import random

    from studyctl.analysis.cache_values import shared_prefix

    rnd = random.Random(0)
    for _ in range(2000):
        columns = [f"k{j}" for j in range(rnd.randint(1, 8))]
        rows = []
        for _ in range(rnd.randint(2, 5)):
            keys = rnd.sample(columns, len(columns)) if rnd.random() < 0.2 else columns
            rows.append({k: rnd.choice([1, 1.0, True, "a", None, 2]) for k in keys[:rnd.randint(1, len(keys))]})
        want = len(rows[0])
        for row in rows[1:]:
            pairs = list(zip(rows[0].items(), row.items(), strict=False))[:want]
            want = next((k for k, ((ka, va), (kb, vb)) in enumerate(pairs)
                         if ka != kb or va != vb or type(va) is not type(vb)), len(pairs))
        assert shared_prefix(rows) == want, rows


def split_collect(root: Path, complete: list[str] | None = None) -> tuple[dict[str, Any], ParseCache]:
    """A collect through a split cache: every value (light unless parsed here or completed), the cache saved."""
    PARSED.clear()
    cache = ParseCache(root / "tables" / ".cache" / "results.json", root, BULKY_SPLIT)
    values = {p.name: cache.get_or_parse(p, p.stat(), parse_bulky) for p in sorted(root.glob("f*.json"))}
    cache.save()
    cache.complete(complete or [])
    cache.save()
    return values, cache


def test_a_split_cache_reads_a_bulky_part_only_when_asked_and_gives_it_back_exactly(tmp_path: Path) -> None:
    root = study(tmp_path, 40)
    (root / "f9.json").write_text("x")
    first, cache = split_collect(root)
    assert cache.misses == 40 and "bulky" in first["f3.json"]
    light, cache = split_collect(root)
    assert cache.hits == 40 and not PARSED
    assert light["f3.json"] == {"n": 3, "info": {"name": "f3.json"}} and light["f9.json"] == ["refused", "no rows"]
    cache_dir = root / "tables" / ".cache"
    wanted = ["f3.json", "f5.json", "f9.json"]
    keep = {cache.heavy_path(shard_of(k)).name for k in wanted}
    for other in cache_dir.glob("results.*.heavy.json"):  # only the asked-for entries' bulky shards are read
        if other.name not in keep:
            other.unlink()
    values, cache = split_collect(root, wanted)
    assert not PARSED
    assert values["f3.json"] == first["f3.json"] and values["f9.json"] == first["f9.json"]
    assert math.isnan(values["f5.json"]["bulky"][0]["bw"]) and values["f5.json"]["n"] == 5
    assert "bulky" not in values["f4.json"]


def test_a_split_cache_rewrites_one_light_and_one_bulky_shard_after_one_change(tmp_path: Path) -> None:
    root = study(tmp_path, 100)
    split_collect(root)
    before = shard_stamps(root)
    assert len(before) == 2 * SHARDS
    (root / "f7.json").write_text("77")
    values, _ = split_collect(root)
    assert PARSED == ["f7.json"] and values["f7.json"]["bulky"][0]["bw"] == 11.0
    after = shard_stamps(root)
    shard = shard_of("f7.json")
    assert {k for k in after if after[k] != before[k]} == {f"results.{shard}.json", f"results.{shard}.heavy.json"}


def test_a_lost_or_stale_bulky_part_is_parsed_again_from_its_file(tmp_path: Path) -> None:
    """Missing, damaged, or left by an older version of the file (a stamp that is not the light part's): the
    file is parsed again, and the repaired shard saved, so the next collect reads it."""
    root = study(tmp_path, 60)
    first, _ = split_collect(root)
    cache_dir = root / "tables" / ".cache"
    shard = shard_of("f7.json")
    heavy = cache_dir / f"results.{shard}.heavy.json"
    old = heavy.read_bytes()
    same_shard = sorted(k for k in first if shard_of(k) == shard)
    heavy.unlink()
    values, _ = split_collect(root, same_shard)
    assert sorted(PARSED) == same_shard and all(values[k] == first[k] for k in same_shard)
    _, _ = split_collect(root, same_shard)
    assert not PARSED  # repaired
    (root / "f7.json").write_text("8")  # the bulky shard of the file before it changed put back
    _, _ = split_collect(root)
    heavy.write_bytes(old)
    values, _ = split_collect(root, ["f7.json"])
    assert PARSED == ["f7.json"] and values["f7.json"]["bulky"][0]["bw"] == 8 / 7
    heavy.write_text('{"damaged')
    values, _ = split_collect(root, ["f7.json"])
    # the shard is rewritten whole: every entry of it parsed again
    assert sorted(PARSED) == same_shard and values["f7.json"]["n"] == 8
    _, _ = split_collect(root, same_shard)
    assert not PARSED


def test_a_split_cache_takes_no_shard_of_an_unsplit_one(tmp_path: Path) -> None:
    """Light and whole shards are of other layouts: neither is read as the other."""
    root = study(tmp_path, 20)
    collect(root)  # unsplit, the same files
    _, cache = split_collect(root)
    assert cache.misses == 20
    PARSED.clear()
    unsplit = ParseCache(root / "tables" / ".cache" / "results.json", root)
    for p in sorted(root.glob("f*.json")):
        unsplit.get_or_parse(p, p.stat(), parse)
    assert unsplit.misses == 20
