"""Time to the first training step after a failure: the recovery rows, table and plots.

A topic package: it imports the analysis base and `plots/`, never `results`, `tables`, `report`,
`collect` or another topic (the architecture test holds this)."""
