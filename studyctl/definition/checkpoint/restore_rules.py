"""What each restore mode reads: one rule per mode, asked by the plan, the reshard map, the worker and the analysis.

A rank's restore is told by three lists of files: what its source rank wrote (`written`), of that what is its alone
(`own`: every kind but the states its data-parallel replicas share), and the shared states of its replica group
(`shared`: `layout.replica_files`, the weights, and with ZeRO 0 the optimizer too). One rank of each group, DP
replica 0, is the group's reader. A mode says which of them the rank ends holding, which it reads from storage and
which it receives from its group's reader; the files opened and the bytes follow from the lists.

A new mode is one rule here (and its word in `vocabulary.RestoreMode`): the rule says what a rank holds, reads and
receives, and the plan, the reshard map and the worker read that from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, get_args

from studyctl.definition.inputs.vocabulary import RestoreMode


class Named(Protocol):
    @property
    def name(self) -> str: ...


F = TypeVar("F", bound=Named)


@dataclass(frozen=True)
class RestoreRule:
    """One restore mode: what a rank ends holding, what it reads from storage and what it receives by MPI."""

    mode: RestoreMode
    # every rank ends holding its group's shared states (a training restore's needs); False: only what it wrote
    every_rank_holds_shared: bool
    # the group's reader reads the shared states once and broadcasts them to its replicas
    broadcasts: bool
    who_reads: str  # in words: the mode as a reader of the code or a test failure sees it

    @property
    def every_rank_reads_shared(self) -> bool:
        """Every replica reads the shared states from storage itself (none arrive by broadcast)."""
        return self.every_rank_holds_shared and not self.broadcasts

    def reads_shared(self, reader: bool) -> bool:
        """This rank reads its group's shared states from storage (`reader`: it is its group's reader)."""
        return self.every_rank_reads_shared or reader

    def receives_shared(self, reader: bool) -> bool:
        """This rank receives its group's shared states from the group's reader."""
        return self.broadcasts and not reader

    def held(self, written: Sequence[F], shared: Sequence[F]) -> list[F]:
        """What a rank holds after the restore: what it wrote, with the shared states where every rank holds them."""
        if not self.every_rank_holds_shared:
            return list(written)
        have = {f.name for f in written}
        return [*written, *(f for f in shared if f.name not in have)]

    def from_storage(self, written: Sequence[F], own: Sequence[F], shared: Sequence[F], reader: bool) -> list[F]:
        """What a rank reads from storage: what it holds, except the shared states it receives instead."""
        return list(own) if self.receives_shared(reader) else self.held(written, shared)

    def received(self, shared: Sequence[F], reader: bool) -> list[F]:
        """What a rank receives from its group's reader."""
        return list(shared) if self.receives_shared(reader) else []


RESTORE_RULES: dict[RestoreMode, RestoreRule] = {rule.mode: rule for rule in (
    RestoreRule("rank", every_rank_holds_shared=False, broadcasts=False,
                who_reads="every rank reads the files it wrote (DLIO's restore)"),
    RestoreRule("full", every_rank_holds_shared=True, broadcasts=False,
                who_reads="every rank reads its own files and every DP replica the states replicas share"),
    RestoreRule("broadcast", every_rank_holds_shared=True, broadcasts=True,
                who_reads="every rank reads its own files; one replica of each group reads the shared states "
                          "and MPI_Bcasts them to the others"),
)}
RESTORE_MODES: tuple[RestoreMode, ...] = get_args(RestoreMode)


_BY_NAME: dict[object, RestoreRule] = {mode: rule for mode, rule in RESTORE_RULES.items()}  # by any value (a cell)


def restore_rule(mode: str) -> RestoreRule:
    """The rule of `mode`, a word of `RestoreMode` (a point's options and a result validate it)."""
    rule = _BY_NAME.get(mode)
    if rule is None:
        raise KeyError(f"restore mode {mode!r} is not one of {', '.join(RESTORE_RULES)}")
    return rule


def named_rule(mode: object) -> RestoreRule | None:
    """The rule `mode` names, None where it names none (a table's empty cell, a DLIO row)."""
    try:
        return _BY_NAME.get(mode)
    except TypeError:  # an unhashable cell
        return None
