"""A DLIO benchmark run imported as rows of our checkpoints table.

A topic package: it imports the analysis base and `plots/`, never `results`, `tables`, `report`,
`collect` or another topic (the architecture test holds this)."""
