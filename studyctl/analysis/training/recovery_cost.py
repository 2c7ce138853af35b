"""The cost model's restart R from a measured time to first step (the recovery scenarios), where the study measured one.

A point that restarted uses its own restart: R = launch + setup + restore + ready (the restore projected to full
size by the point's restore factor, as its own restore is). A point that did not takes the mean restart of the
cell equal to it in every setting but `recovery.table` that restarted in the same shape (a node lost before `same`: a
failure replaces a node). `training.restart_s`, when given, replaces the measured launch (a relaunch at full
scale). Each row says where its R came from (`relaunch_source`, `restore_source`).

Points equal in every setting but `recovery.table` write the same checkpoint: each repetition's write is costed as the
mean of theirs (`share_writes`), so the scenarios of one cell differ by their restarts and not by the noise of
identical writes. The repetitions stay apart, so a cell's CI over them still carries the write's spread.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from studyctl.analysis.cells import identity_columns
from studyctl.definition.inputs.training import TrainingSpec

LAUNCH, RESTORE, READY, SETUP = "restart_launch_s", "restart_restore_s", "restart_ready_s", "restart_setup_s"


def _col(t: pd.DataFrame, name: str) -> np.ndarray:
    if name not in t:
        return np.full(len(t), np.nan)
    return pd.to_numeric(t[name], errors="coerce").to_numpy(dtype=float)


def _after_restore(t: pd.DataFrame) -> np.ndarray:
    """What a restart adds to its restore and launch: ready, and setup (0 in results from before it was recorded)."""
    setup = _col(t, SETUP)
    return _col(t, READY) + np.where(np.isnan(setup), 0.0, setup)


def scenario_labels(t: pd.DataFrame) -> list[str]:
    """Each row's recovery scenario as the sweep says it ("none" for a point that did not restart)."""
    values = t["recovery"].tolist() if "recovery" in t else [None] * len(t)
    return [v if isinstance(v, str) else "none" for v in values]


def _keys_without_recovery(t: pd.DataFrame) -> pd.Series:
    cols = [c for c in identity_columns(t) if c != "recovery"]
    return pd.util.hash_pandas_object(t[cols].astype(str), index=False)


def share_writes(t: pd.DataFrame, columns: tuple[str, ...]) -> None:
    """In place: where points equal in every setting but `recovery.table` (one of them restarted) share a repetition,
    each gets their mean of `columns` (the write's measured figures, NaN skipped); `write_source` says which."""
    labels = np.array(scenario_labels(t), dtype=object)
    t["write_source"] = "own"
    if not (labels != "none").any():
        return
    rep = t["repetition"].to_numpy() if "repetition" in t else np.zeros(len(t))
    frame = pd.DataFrame({"key": _keys_without_recovery(t).to_numpy(), "rep": rep, "restarted": labels != "none"})
    groups = frame.groupby(["key", "rep"], sort=False, dropna=False)
    size, restarted = groups["key"].transform("size").to_numpy(), groups["restarted"].transform("any").to_numpy()
    shared = (size > 1) & restarted
    if not shared.any():
        return
    for c in (c for c in columns if c in t):
        values = pd.to_numeric(t[c], errors="coerce")
        t[c] = np.where(shared, values.groupby([frame["key"], frame["rep"]], dropna=False).transform("mean"), values)
    t["write_source"] = np.where(shared, [f"shared: the mean write of {n} points equal but for recovery"
                                         for n in size], "own")


def _donors(t: pd.DataFrame) -> tuple[pd.Series | None, dict[object, tuple[float, float, float, str]]]:
    """(each row's key without `recovery.table`, key → mean (launch, restore, ready, scenario) of its preferred
    same-shape restart); no keys where no row restarted (hashing every row's settings was most of a study's cost
    table when nothing restarted)."""
    labels = np.array(scenario_labels(t), dtype=object)
    lost = np.array([s.startswith("lost_nodes") for s in labels], dtype=bool)
    have = (lost | (labels == "same")) & ~np.isnan(_col(t, "restart_time_to_first_step_s"))
    if not have.any():
        return None, {}
    keys = _keys_without_recovery(t)
    # lost_nodes (fewest first) before same: a failure's restart replaces a node
    frame = pd.DataFrame({"key": keys[have], "rank": np.where(lost, 0, 1)[have], "label": labels[have],
                          LAUNCH: _col(t, LAUNCH)[have], RESTORE: _col(t, RESTORE)[have],
                          READY: _after_restore(t)[have]})
    means = frame.groupby(["key", "rank", "label"], sort=True)[[LAUNCH, RESTORE, READY]].mean().reset_index()
    best = means.drop_duplicates("key")
    return keys, {k: (a, b, c, str(s)) for k, a, b, c, s in zip(best["key"], best[LAUNCH], best[RESTORE],
                                                                 best[READY], best["label"], strict=True)}


def measured_restart(t: pd.DataFrame, spec: TrainingSpec, relaunch: np.ndarray, restore: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(relaunch, restore after a failure) with the measured restart where the study has one; sources in place."""
    keys, donors = _donors(t)
    own = ~np.isnan(_col(t, "restart_time_to_first_step_s"))
    if not donors and not own.any():
        return relaunch, restore
    relaunch, restore = relaunch.copy(), restore.copy()
    factor = _col(t, "restore_projection_factor")
    relaunch_src, restore_src = t["relaunch_source"].to_numpy(dtype=object), t["restore_source"].to_numpy(dtype=object)
    labels = scenario_labels(t)
    for i, key in enumerate(keys if keys is not None else [None] * len(t)):
        if own[i]:
            launch, phase, ready, where = _col(t, LAUNCH)[i], _col(t, RESTORE)[i], _after_restore(t)[i], "its own"
            scenario = labels[i]
        elif key in donors:
            launch, phase, ready, scenario = donors[key]
            where = "the cell's"
        else:
            continue
        scale = factor[i] if np.isfinite(factor[i]) else 1.0
        relaunch[i] = spec.restart_s if spec.restart_s is not None else launch
        restore[i] = phase * scale + ready
        relaunch_src[i] = ("given (training.restart_s)" if spec.restart_s is not None
                           else f"measured launch of {where} restart (recovery {scenario})")
        restore_src[i] = (f"measured time to first step of {where} restart (recovery {scenario}): restore + setup + "
                          "ready")
    t["relaunch_source"], t["restore_source"] = relaunch_src, restore_src
    return relaunch, restore
