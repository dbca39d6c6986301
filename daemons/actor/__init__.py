"""The actor daemon: steps envs, pushes transitions to each policy's learner, follows their weights."""
