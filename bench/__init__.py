"""Benchmarks of Keel's own cost, run by hand; see bench/README.md."""
