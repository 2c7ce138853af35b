"""What to measure, pure: catalog, layout, points, sweep schema, expansion, plan."""
