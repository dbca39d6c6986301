"""The evaluator daemon: greedy rounds of episodes with each policy's newest weights."""
