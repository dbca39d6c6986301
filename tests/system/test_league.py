"""A self-play league as real processes: Connect Four with a main policy and an exploiter, each with its own
learner and actor; each member's actor plays the pooled versions its league entry names, and each learner rates
its policy against the other's versions."""

from __future__ import annotations

from tests.system.harness import write_config
from tests.system.test_multiagent import POOLED

LEAGUE = [
    *POOLED,  # a new opponent every 8 games: both pools come up within the test's games
    "eval.enabled=false",
    "supervisor.heartbeat_interval_s=0.2",
    "actors.weights_refresh_s=0.5",
]
MEMBERS = {"main": "actor-0", "exploiter": "actor-1"}  # the league's split: one actor each, in config order


def test_each_member_plays_the_pools_its_entry_names_and_is_rated_against_the_other(tmp_path, procs, collector):
    config, path = write_config(tmp_path, LEAGUE, base="examples/connect_four_league.toml")
    for policy in MEMBERS:
        procs.start(f"learner-{policy}", "learner", str(path), "--policy", policy, "--control", collector.endpoint)
    for index, actor in enumerate(MEMBERS.values()):
        procs.start(actor, "actor", str(path), "--index", str(index), "--control", collector.endpoint)

    def rated_against_each_other() -> bool:
        return (
            "train_win_rate_vs_exploiter" in collector.counters("learner-main")
            and "train_win_rate_vs_main" in collector.counters("learner-exploiter")
            and all(collector.counter(actor, "selfplay_games", 0) >= 30 for actor in MEMBERS.values())
            # an actor's heartbeat may trail the games its learner has already rated: wait for the load it made
            and all(collector.counter(actor, "opponent_loads", 0) >= 1 for actor in MEMBERS.values())
        )

    collector.wait_for(rated_against_each_other, 150, "each learner rating games against the other's versions", procs)
    for policy in MEMBERS:
        learner = f"learner-{policy}"
        # each actor sends only its own member's learning seat: nothing reaches the other learner
        assert collector.counter(learner, "batches_received", 0) > 0
        assert collector.counter(learner, "batches_foreign", 0) == 0
        assert collector.counter(learner, "batches_malformed", 0) == 0
        assert 0.0 <= collector.counter(learner, "train_pool_win_rate") <= 1.0
    # an actor follows the weights of its own member only (the other's pool through a watch, never pushed to)
    assert collector.counter("actor-0", "version.main", -1) >= 0 and "version.exploiter" not in collector.counters(
        "actor-0"
    )

    # each member's checkpoint plays the evaluator's fixed opponent from its own seat (`tandem eval --policy`)
    procs.stop_all()  # the learners write their checkpoints on SIGTERM
    (tmp_path / "run" / "config.toml").write_text(path.read_text())  # as `tandem up` leaves it in its run directory
    from tandem.client.api.evaluate import evaluate

    for policy in MEMBERS:
        result = evaluate(tmp_path / "run", policy=policy, episodes=6)
        assert result["policy"] == policy and result["against"] == "random", result
        assert sum(result["games"].values()) == 6 and set(result["returns"]) <= {0.0, 0.5, 1.0}, result
