"""The MLPerf Storage view: a study judged against MLPerf checkpointing's CLOSED rules, and the submission tree.

A topic package: it imports the analysis base and `plots/`, never `results`, `tables`, `report`,
`collect` or another topic (the architecture test holds this)."""
