"""Soft Actor-Critic: its spec and section (spec.py, no torch), its learner and policy (learner.py), its networks
(nets.py)."""
