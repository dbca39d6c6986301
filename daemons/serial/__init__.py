"""Serial mode (`tandem up CONFIG --serial`): one process steps the envs, trains and evaluates in turn.

The same algorithm objects and code paths as a daemon run (the actor's stepping, the learner's intake and
feed, the evaluator's rounds), without sockets, threads or clocks in the way: deterministic for a seed,
so a debugger can step through an update and an async run can be compared with its serial twin.
"""
