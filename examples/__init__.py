"""Example run configs and games; installed as `tandem.examples`, so the benchmarks find their configs anywhere."""
