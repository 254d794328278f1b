"""Storage: Delta tables (the log with delta-rs, data files with Spark), input formats, operator
state, and a model's result and changelog tables."""
