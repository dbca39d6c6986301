"""APPO and IMPALA: specs and sections (spec.py, no torch), the learner (learner.py) with V-trace and the PPO
losses and minibatches, and the actor's policy (policy.py)."""
