"""Benchmarks for streamjoin: data generators and drivers (not part of the package)."""
