"""`studyctl models`: the model catalog."""

from __future__ import annotations

from rich.table import Table

from studyctl.cli.common import out
from studyctl.units import format_bytes


def models() -> None:
    """List the model catalog with DLIO's default layout and checkpoint size."""
    from studyctl.spec.catalog import CATALOG, DLIO_DEFAULT_LAYOUT
    from studyctl.spec.layout import Parallelism, num_parameters, summarize

    table = Table("model", "layers", "hidden", "ffn", "heads/kv", "vocab", "params", "DLIO layout",
                  "checkpoint")
    for name, m in CATALOG.items():
        tp, pp, zero = DLIO_DEFAULT_LAYOUT[name]
        par = Parallelism(tp, pp, 8 if zero == 3 else 2 if tp * pp > 1 else 8, zero)
        table.add_row(name, str(m.num_layers), str(m.hidden_size), str(m.ffn_hidden_size),
                      f"{m.num_attention_heads}/{m.num_kv_heads}", str(m.vocab_size),
                      f"{num_parameters(m) / 1e9:.3f} B", f"TP{tp} PP{pp} ZeRO-{zero}",
                      format_bytes(summarize(m, par).total_bytes))
    out.print(table)
