"""A function of result files: tables, statistics, plots, report, compare, DLIO import.

Three tiers: the base (top-level modules that import no topic: cells, stats, values, findings, status, columns,
the caches), the topic packages (mlperf, dlio, hardware, training, recovery, projection) with `plots/` for shared
drawing, and the assembly that joins them (results, tables, figures, compare, collect*, report/).
"""
