"""What a point leaves: the result schema and its fields, and the plausibility rules that hold every number to its
unit's bound and to what the point's plan fixes."""
