"""How an algorithm takes its data: a replay feed (n-step transitions, a rate limiter) or a queue of whole
unrolls. Algorithms name their feed (`make_feed`) and the learner fills it, so it sits below both."""
