"""What to measure, pure, in sub-layers that import down only: inputs, checkpoint, planning, result."""
