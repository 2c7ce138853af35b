"""What one attempt is, shared by study and backends: records, paths, outcome."""
