"""What checkpointing costs a training run: the per-point cost rows, the training table and its plots.

A topic package: it imports the analysis base and `plots/`, never `results`, `tables`, `report`,
`collect` or another topic (the architecture test holds this)."""
