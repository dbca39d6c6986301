"""Tandem's long-running processes: actor, learner, supervisor, watchdog, replay, algorithms, env building."""
