"""The thresholds the named-limit rules decide against, each with its reason: one home for the numbers, which the
rule declarations (`limit_rules`) print and their tests (`limit_conditions`) compare with."""

from __future__ import annotations

# At or above this share of its shape's ceiling (over the share's whole 95% interval) a cell is at the hardware:
# single runs on a shared disk swing 20% and medians of three ~15%, so a smaller gap is not
# evidence of anything else.
STORAGE_BOUND = 0.85
# The heaviest rank this much above the mean bytes: more than the few percent of rounding in even layouts.
IMBALANCE_RATIO = 1.15
# Evening the bytes must close at least this share of the gap to the even ceiling for imbalance to be named: then
# it is the largest single cause, larger than every other one together.
IMBALANCE_CLOSES = 0.5
# At least this share of the heaviest rank's extra bytes (over the ranks that moved bytes) must show as extra time:
# its time follows its bytes (ranks bound one by one). On one shared device the heavy rank finishes alone at nearly
# the device's rate, its extra bytes cost little extra time, and evening them would gain little.
IMBALANCE_TIME_FOLLOWS = 0.5
# A quarter of the slowest rank's time in per-file calls is more than the data phase's noise (~15%).
METADATA_SHARE = 0.25
# Below this mean file size an fsync costs about a journal commit (milliseconds), the time the disk streams a few
# MiB in, so a buffered fsync counts as per-file cost; above it, its time is the data's flush. Files this small
# also cost a request's latency each when read: a quarter of the time beyond their bytes at the ceiling is theirs.
SMALL_FILE_BYTES = 8 << 20
# A broadcast restore is network-bound when broadcasting takes this share of its time at this share of MPI's
# measured broadcast bandwidth.
NETWORK_TIME_SHARE = 0.3
NETWORK_BOUND = 0.7
# An async snapshot at this share of the measured per-rank memory copy rate is bound by host memory.
MEMORY_BOUND = 0.7
# An engine's own work (serialization, copies, planning) taking a quarter of its time is more than the data phase's
# noise (~15%, as for METADATA_SHARE); where the share has a 95% CI, its low end must be above 0 as well.
FRAMEWORK_SHARE = 0.25
