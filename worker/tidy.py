"""`python -m worker.tidy ROOT STUDY_DIR POINT_ID`: remove a point's node-local place on the node it runs on.

Run once per node by the clean-up job studyctl submits for an attempt that ended without cleaning its tier
(killed, timed out, cancelled): a node-local tier is reachable only from its own node. The place is checked and
removed as every clean-up does it (`studyctl.removal.remove_place`: plain names, no link followed).
"""

from __future__ import annotations

import os
import sys

from studyctl.definition.checkpoint.places import Place
from studyctl.removal import remove_place
from worker import provenance
from worker.nodes import dir_name


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m worker.tidy ROOT STUDY_DIR POINT_ID", file=sys.stderr)
        return 2
    node, _ = provenance.node_name(0, 1)
    place = Place(argv[0], argv[1], argv[2], node_local=True).on_node(os.environ.get("SLURMD_NODENAME")
                                                                      or dir_name(node))
    problem = place.problem()
    if problem:
        print(f"studyctl tidy: {problem}", file=sys.stderr)
        return 2
    removed = remove_place(place)
    print(f"{node}: {place.path} {'removed' if removed else 'not there'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
