"""A simulated training step: busy compute that competes with a background persist for CPU and memory.

The work is BLAKE2 hashing of an in-memory array: it runs at memory and CPU speed and releases the GIL
(hashlib does for buffers over 2 KiB), so a persist thread in the same process really runs beside it,
as a checkpoint thread runs beside a training loop. The number of passes is calibrated once per rank
to `step_s` on an otherwise idle rank; a step that then takes longer was slowed by the persist.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import time

from studyctl.definition.points import CALIBRATION_STEPS

ARRAY_BYTES = 4 << 20  # larger than a core's cache: memory traffic, like a real step's


class Compute:
    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self.data = memoryview(bytearray(os.urandom(ARRAY_BYTES)))
        self.passes = 1
        self.baseline_s = step_s

    def _run(self, passes: int) -> float:
        start = time.perf_counter()
        for _ in range(passes):
            hashlib.blake2b(self.data).digest()
        return time.perf_counter() - start

    def calibrate(self) -> None:
        """Passes that take `step_s` here, then the measured time of such a step with nothing beside it."""
        self._run(1)  # warm the array and the code
        one = min(self._run(1) for _ in range(3))
        self.passes = max(1, round(self.step_s / max(one, 1e-6)))
        self.baseline_s = statistics.median(self._run(self.passes) for _ in range(CALIBRATION_STEPS))

    def step(self) -> float:
        """One training step; returns how long it took."""
        return self._run(self.passes)
