"""`studyctl models`: the model catalog."""

from __future__ import annotations

from rich.table import Table

from studyctl.cli.common import out
from studyctl.units import format_bytes


def models() -> None:
    """The model catalog: parameters, bytes per parameter, checkpoint size at the default layout."""
    from studyctl.api import model_rows

    table = Table("model", "layers", "hidden", "ffn", "heads/kv", "vocab", "architecture", "params", "B/param",
                  "default layout", "checkpoint", "DLIO's size", "MLPerf procs")
    rows = model_rows()
    for r in rows:
        table.add_row(r["model"] + ("*" if r["note"] else ""), str(r["num_layers"]), str(r["hidden_size"]),
                      str(r["ffn_hidden_size"]), r["heads"], str(r["vocab_size"]), r["architecture"],
                      f"{r['parameters'] / 1e9:.4f} B", str(r["bytes_per_parameter"]), r["layout"],
                      format_bytes(r["checkpoint_bytes"]), format_bytes(r["dlio_checkpoint_bytes"], missing="same"),
                      str(r["mlperf_processes"] or "-"))
    out.print(table)
    for r in rows:
        if r["note"]:
            out.print(f"* {r['model']}: {r['note']}")
