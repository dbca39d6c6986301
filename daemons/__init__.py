"""The long-running processes (actor, learner, evaluator, supervisor), grouped by process or concern; `main.py` runs any of them."""
