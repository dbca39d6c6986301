"""The evaluator's kept checkpoints: best.pt follows the highest return (ties keep the first), solved.pt the first
round that met stop.eval_return, one of each per policy, atomic, read back on restart, and never fatal."""

from __future__ import annotations

import math

import numpy as np
import torch

from tandem.daemons.evaluator.kept import KEPT_FILES, KeptCheckpoints, improves, policy_returns, read_evaluation, solves


def weights_of(version: int) -> dict[str, np.ndarray]:
    return {"layer.weight": np.full((2, 3), float(version), np.float32), "layer.bias": np.arange(2, dtype=np.float32)}


def kept(tmp_path, policies=("default",), target=None, algorithm="double_dqn") -> KeptCheckpoints:
    return KeptCheckpoints({p: tmp_path / f"learner-{p}" for p in policies}, {p: algorithm for p in policies}, target)


def play(k: KeptCheckpoints, round_no: int, value: float, version: int, **more: float) -> list:
    counters = {"eval_return": value, "eval_version": version, **more}
    versions = {p: version for p in k.directories}
    return k.after_round(counters, versions, round_no, 20, lambda policy: weights_of(versions[policy]))


def load(path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def test_choosing_a_best_is_strict_and_finite_and_solving_is_the_stop_test():
    assert improves(1.0, None) and improves(2.0, 1.0)
    assert not improves(1.0, 1.0) and not improves(0.5, 1.0)  # a tie keeps the earlier
    assert not improves(math.nan, None) and not improves(math.inf, 1.0)
    assert solves(475.0, 475.0) and solves(500.0, 475.0)
    assert not solves(474.9, 475.0) and not solves(500.0, None) and not solves(None, 475.0)


def test_each_policy_is_judged_by_its_own_agents_and_a_lone_policy_by_the_round():
    assert policy_returns({"eval_return": 7.0}, ["default"]) == {"default": 7.0}
    counters = {"eval_return": 1.0, "eval_return.speaker": -3.0, "eval_return.listener": 5.0}
    assert policy_returns(counters, ["speaker", "listener"]) == {"speaker": -3.0, "listener": 5.0}
    assert policy_returns({"eval_return": 1.0, "eval_return.a": 2.0}, ["a", "b"]) == {"a": 2.0}  # b finished none


def test_best_keeps_the_weights_of_the_highest_return_and_solved_the_first_to_reach_the_target(tmp_path):
    k = kept(tmp_path, target=100.0)
    directory = tmp_path / "learner-default"
    rounds = [(1, 10.0, 5), (2, 120.0, 9), (3, 90.0, 12), (4, 120.0, 15), (5, 150.0, 20), (6, 60.0, 22)]
    written = {n: play(k, n, value, version) for n, value, version in rounds}
    assert written[1] == [directory / "best.pt"]
    assert sorted(written[2]) == [directory / "best.pt", directory / "solved.pt"]
    assert written[3] == written[4] == written[6] == []  # lower, a tie, lower
    assert written[5] == [directory / "best.pt"]  # solved is never replaced
    best, solved = load(directory / "best.pt"), load(directory / "solved.pt")
    assert best["version"] == 20 and best["evaluation"]["return"] == 150.0 and best["evaluation"]["round"] == 5
    assert best["evaluation"]["previous_best"] == 120.0 and best["evaluation"]["kind"] == "best"
    assert torch.equal(best["algorithm"]["online"]["layer.weight"], torch.full((2, 3), 20.0))
    assert best["algorithm"]["algorithm"] == "double_dqn"
    assert (
        solved["version"] == 9 and solved["evaluation"]["return"] == 120.0 and solved["evaluation"]["target"] == 100.0
    )
    assert torch.equal(solved["algorithm"]["online"]["layer.weight"], torch.full((2, 3), 9.0))
    assert sorted(p.name for p in directory.iterdir()) == ["best.pt", "solved.pt"]  # no temp file left
    assert k.counters() == {"eval_best_return.default": 150.0, "kept_write_failures": 0}


def test_a_restarted_evaluator_compares_with_the_best_on_disk_and_keeps_the_solved_one(tmp_path):
    first = kept(tmp_path, target=100.0)
    play(first, 1, 130.0, 7)
    (tmp_path / "learner-default" / ".kept-abc.tmp").write_bytes(b"half a file")  # a write killed midway
    again = kept(tmp_path, target=100.0)
    assert again.best == {"default": 130.0} and again.solved
    assert not list((tmp_path / "learner-default").glob(".kept-*"))
    assert play(again, 1, 110.0, 30) == []  # solved already, and not better
    assert play(again, 2, 140.0, 31) == [tmp_path / "learner-default" / "best.pt"]
    assert load(tmp_path / "learner-default" / "solved.pt")["version"] == 7


def test_several_policies_keep_one_best_each_and_solve_together(tmp_path):
    k = kept(tmp_path, ("speaker", "listener"), target=0.0, algorithm="appo")
    play(k, 1, -5.0, 3, **{"eval_return.speaker": -2.0, "eval_return.listener": -8.0})
    play(k, 2, 1.0, 4, **{"eval_return.speaker": -4.0, "eval_return.listener": 6.0})
    speaker, listener = tmp_path / "learner-speaker", tmp_path / "learner-listener"
    assert load(speaker / "best.pt")["version"] == 3 and load(listener / "best.pt")["version"] == 4
    assert load(listener / "best.pt")["algorithm"]["net"]["layer.bias"].tolist() == [0.0, 1.0]
    assert read_evaluation(speaker / "solved.pt")["round"] == read_evaluation(listener / "solved.pt")["round"] == 2
    assert sorted(p.name for p in speaker.iterdir()) == sorted(KEPT_FILES.values())


def test_a_failed_write_is_counted_and_tried_again_next_round(tmp_path):
    (tmp_path / "learner-default").write_text("a file where the directory should be")
    k = kept(tmp_path)
    assert play(k, 1, 10.0, 1) == [] and k.best == {"default": None}
    assert k.counters()["kept_write_failures"] == 1
    (tmp_path / "learner-default").unlink()
    assert play(k, 2, 5.0, 2) == [tmp_path / "learner-default" / "best.pt"]


def test_an_algorithm_without_a_known_acting_network_keeps_nothing(tmp_path, caplog):
    k = kept(tmp_path, algorithm="my_plugin")
    assert play(k, 1, 10.0, 1) == [] and not (tmp_path / "learner-default").exists()
    assert "no best or solved checkpoints for default" in caplog.text


def test_an_unreadable_best_is_replaced_by_the_next_round(tmp_path):
    directory = tmp_path / "learner-default"
    directory.mkdir()
    (directory / "best.pt").write_bytes(b"torn")
    k = kept(tmp_path)
    assert k.best == {"default": None}
    assert play(k, 1, -1.0, 2) == [directory / "best.pt"] and load(directory / "best.pt")["version"] == 2


def test_the_record_is_plain_data_that_weights_only_loading_reads(tmp_path):
    play(kept(tmp_path, target=1.0), 1, 3.0, 1)
    record = read_evaluation(tmp_path / "learner-default" / "best.pt")
    assert record["return"] == 3.0 and record["versions"] == {"default": 1} and record["episodes"] == 20
    assert read_evaluation(tmp_path / "learner-default" / "missing.pt") is None
