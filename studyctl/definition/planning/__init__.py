"""A study planned: the sweep schema, expansion, the points a study adds (ceilings, calibration), run time, the plan
row and its summary, strategies and the training inverse question."""
