"""`tandem bench NAME`: benchmarks that print figures (and `--json`), each a ratio or median measured in one run."""
