"""What every process that acts with a policy shares: following a learner's weights, stepping envs, building
unrolls and sending them (the actor, the evaluator and serial mode import these; no process package imports
another)."""
