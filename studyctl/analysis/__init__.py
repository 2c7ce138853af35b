"""A function of result files: tables, statistics, plots, report, compare, DLIO import."""
