"""The system description a v3.0 submission carries (`systems/<system>.yaml`), filled where a study's results
say and null with a note where studyctl cannot know: the site sees what it still has to write.

The fields are those of the descriptions published in mlcommons/storage_results_v3.0 (system_under_test:
clients, solution with architecture and capabilities, deployment, product_nodes), with Rules.md §4.7.3-4.7.4
(remapping time; simultaneous read/write) in `capabilities`. Written as YAML by hand so each blank carries its
note as a comment; values are JSON scalars (valid YAML), so text from results never becomes YAML structure.
Credentials never appear: an object store's environment is its endpoint, region and addressing only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from studyctl.definition.result.result_schema import Result
from studyctl.units import GIB

TIB = 1 << 40
SITE = "the site's to state"


@dataclass(frozen=True)
class Field:
    value: Any
    note: str = ""


def blank(note: str = SITE) -> Field:
    return Field(None, note)


def _client(r: Result, spec: dict[str, Any]) -> dict[str, Any]:
    prov = r.provenance
    memory = prov.host_memory_bytes
    simulated = " (simulated nodes: ranks grouped on one machine)" if prov.simulated_nodes else ""
    env = [{"name": Field(k), "value": Field(str(spec[k]))} for k in ("endpoint", "region", "addressing")
           if spec.get(k) is not None]
    return {
        "friendly_description": blank(),
        "chassis": {"model_name": blank("studyctl does not read the hardware model"),
                    "cpu_model": blank("not in studyctl's results"), "cpu_qty": blank("not in studyctl's results"),
                    "cpu_cores": blank(f"the result has the cores the ranks may use ({prov.host_cores}), not the "
                                       "chassis' count" if prov.host_cores else "not in studyctl's results"),
                    "memory_capacity": Field(round(memory / GIB), "GiB, as the published descriptions give it; the "
                                             "smallest host's") if memory else blank("host memory not recorded")},
        "networking": blank(), "sysctl": blank(),
        "environment": env or blank("no storage-backend settings (POSIX); list the site's tuning here"),
        "drives": blank(),
        "operating_system": {"name": blank(),
                             "version": Field(prov.kernel, "the kernel release; the distribution's version is the "
                                              "site's")},
        "quantity": Field(len(prov.node_names), f"nodes the ranks ran on{simulated}"),
    }


def _solution(r: Result, api: str, system: str) -> dict[str, Any]:
    capacity = r.filesystem.total_bytes / TIB if api == "posix" and r.filesystem.total_bytes else None
    return {
        "submission_name": Field(system, "the study's name; rename to the system's"),
        "friendly_description": blank(),
        "architecture": {"storage_location": blank("local or remote: the site's"),
                         "benchmark_API": Field("object" if api == "object" else "file"),
                         "product_API": blank(), "client_footprint": blank(), "client_installation": blank()},
        "capabilities": {
            "multi_host": blank("§4.7.4: does the storage serve many hosts (False for node-local)"),
            "simultaneous_write": blank("§4.7.4: simultaneous writes by several hosts"),
            "simultaneous_read": blank("§4.7.4: simultaneous reads by several hosts"),
            "remap_time_in_seconds": blank("§4.7.3: studyctl reads right after writing; time any remapping")},
        "usable_capacity_tib": Field(round(capacity, 3), f"{r.filesystem.fstype} at {r.filesystem.mount_point} "
                                     "as statvfs saw it") if capacity else blank(),
        "availability": blank(),
    }


def system_description(r: Result, api: str, spec: dict[str, Any], system: str) -> dict[str, Any]:
    """The description's tree: leaves are `Field`s (value and note)."""
    return {"system_under_test": {"clients": [_client(r, spec)], "solution": _solution(r, api, system),
                                  "deployment": blank("on-premises or cloud"),
                                  "product_nodes": blank("the storage servers: the site's")}}


def blanks(tree: Any, path: str = "") -> list[str]:
    """Dotted paths of every null field."""
    if isinstance(tree, Field):
        return [path] if tree.value is None else []
    if isinstance(tree, list):
        return [b for i, item in enumerate(tree) for b in blanks(item, f"{path}[{i}]")]
    return [b for k, v in tree.items() for b in blanks(v, f"{path}.{k}" if path else k)]


def _scalar(field: Field) -> str:
    note = " ".join(field.note.split())  # one line
    return json.dumps(field.value, ensure_ascii=False) + (f"  # {note}" if note else "")


def to_yaml(tree: Any, indent: int = 0) -> list[str]:
    """Block YAML of a Field tree, notes as comments."""
    pad, lines = " " * indent, []
    for key, value in tree.items():
        if isinstance(value, Field):
            lines.append(f"{pad}{key}: {_scalar(value)}")
        elif isinstance(value, list):
            lines.append(f"{pad}{key}:")
            for item in value:
                body = to_yaml(item, indent + 2)
                lines += [f"{pad}- {body[0].lstrip()}", *body[1:]]
        else:
            lines += [f"{pad}{key}:", *to_yaml(value, indent + 2)]
    return lines
