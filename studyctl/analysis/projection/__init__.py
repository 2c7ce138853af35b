"""Time at full size fitted from runs at smaller scales (non-negative least squares), per point and cell.

A topic package: it imports the analysis base and `plots/`, never `results`, `tables`, `report`,
`collect` or another topic (the architecture test holds this)."""
