"""How close to the hardware each cell came: ceilings, the per-rank load, the named limit and its rules.

A topic package: it imports the analysis base and `plots/`, never `results`, `tables`, `report`,
`collect` or another topic (the architecture test holds this)."""
