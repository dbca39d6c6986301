"""The long-running processes (actor, learner, evaluator, supervisor), by process or concern; `main.py` runs any."""
