"""The supervisor's curves (metrics.jsonl, TensorBoard) and HTTP endpoint (/metrics, /healthz), by explicit clock."""

from __future__ import annotations

import json
import socket
import sys
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tandem.daemons.config import load_config
from tandem.daemons.supervisor.metrics_http import MetricsPortBusy, MetricsServer, health
from tandem.daemons.supervisor.observer import Observer, ObserverError
from tandem.daemons.supervisor.run_metrics import RunMetricsLog, flatten
from tandem.daemons.supervisor.states import State
from tandem.daemons.supervisor.status import status_data
from tests.daemons.supervisor.builders import ROOT, as_started, beat, supervisor


def make(tmp_path, *overrides: str):
    """Every process as if started and not yet heard from (nothing is spawned)."""
    return as_started(supervisor(tmp_path, *overrides), State.STOPPED)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_flatten_keeps_numbers_under_slash_paths():
    figures = {
        "env_steps": 10,
        "mean_return_100": None,
        "eval_version": 3,
        "stopping": True,
        "policies": {"a": {"eval_return": 1.5, "version": None}},
        "agent_returns_100": {"p0": -2.0},
    }
    assert flatten(figures) == {"env_steps": 10, "policies/a/eval_return": 1.5, "agent_returns_100/p0": -2.0}


def test_run_metrics_log_appends_flushed_records(tmp_path):
    curves = RunMetricsLog(tmp_path, tensorboard=False)
    curves.write({"env_steps": 100, "eval_return": 20.0}, wall_time=1000.0)
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()  # readable before close: flushed per record
    assert json.loads(lines[0]) == {"time": 1000.0, "env_steps": 100, "eval_return": 20.0}
    curves.close()
    curves = RunMetricsLog(tmp_path, tensorboard=False)  # a restarted supervisor appends
    curves.write({"env_steps": 200}, wall_time=1001.0)
    curves.close()
    assert [json.loads(x)["env_steps"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [100, 200]


def test_tensorboard_scalars_are_written_against_env_steps(tmp_path):
    pytest.importorskip("tensorboard", reason="tensorboard is optional (tandem[tensorboard])")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    curves = RunMetricsLog(tmp_path)
    for steps, ret in ((100, 10.0), (300, 30.0)):
        curves.write({"env_steps": steps, "eval_return": ret, "policies": {"a": {"eval_return": ret + 1}}})
    curves.close()
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("eval_return")] == [(100, 10.0), (300, 30.0)]
    assert [e.value for e in acc.Scalars("policies/a/eval_return")] == [11.0, 31.0]


def test_health_is_503_while_a_process_is_fatal_or_the_loop_is_stuck(tmp_path):
    sup = make(tmp_path)
    snapshot = {"status": status_data(sup, 0.0), "figures": {}, "published": 0.0}
    assert health(snapshot, 1.0)[0] == 200
    assert health(snapshot, 60.0)[0] == 503  # nothing published for a minute
    assert health(None, 0.0)[0] == 503
    rec = sup.processes["actor-0"].record
    rec.state, rec.last_error = State.FATAL, "crash loop"
    code, body = health({"status": status_data(sup, 0.0), "figures": {}, "published": 0.0}, 1.0)
    assert code == 503 and body["unhealthy"] == ["actor-0"]


def test_endpoint_serves_metrics_and_healthz_from_the_published_snapshot(tmp_path):
    sup = make(tmp_path)
    server = MetricsServer("127.0.0.1", 0)
    try:
        base = "http://{}:{}".format(*server.address)
        assert get(base + "/healthz")[0] == 503  # nothing published yet
        sup.heartbeat(beat("actor-0", env_steps=500, batches_dropped=2), now=1.0)
        sup.heartbeat(beat("learner-default", updates=7, version=3, lag_mean=0.5), now=1.0)
        server.publish({"status": status_data(sup, 1.0), "figures": sup.view.figures(1.0)})
        code, body = get(base + "/healthz")
        assert code == 200 and json.loads(body)["healthy"]
        families = {f.name: f for f in text_string_to_metric_families(get(base + "/metrics")[1])}
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples}
        labels = (("process", "actor-0"), ("role", "actor"), ("run", "cartpole"))
        assert samples[("tandem_process_env_steps_total", labels)] == 500
        assert samples[("tandem_process_rss_bytes", labels)] == 50 * 2**20
        assert samples[("tandem_policy_version", (("policy", "default"), ("run", "cartpole")))] == 3
        assert samples[("tandem_env_steps_total", (("run", "cartpole"),))] == 500
        state = {
            s.labels["state"]: s.value
            for s in families["tandem_process_state"].samples
            if s.labels["process"] == "evaluator"
        }
        assert state["STOPPED"] == 1 and state["RUNNING"] == 0
        sup.processes["learner-default"].record.state = State.FATAL  # the main loop's next snapshot says so
        server.publish({"status": status_data(sup, 2.0), "figures": sup.view.figures(2.0)})
        code, body = get(base + "/healthz")
        assert code == 503 and json.loads(body)["unhealthy"] == ["learner-default"]
        assert get(base + "/nothing")[0] == 404
    finally:
        server.close()
    assert not server.thread.is_alive()


def test_a_port_in_use_is_an_error_naming_the_key(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(MetricsPortBusy, match=f"supervisor.metrics_port = {port} .*already in use"):
            MetricsServer("127.0.0.1", port)
        config = load_config(ROOT / "examples" / "cartpole.toml", [f"supervisor.metrics_port={port}"])
        with pytest.raises(ObserverError, match="supervisor.metrics_port"):
            Observer(config, tmp_path)


def test_observer_writes_a_record_a_second_and_a_last_one_on_close(tmp_path):
    sup = make(tmp_path)
    observer = Observer(sup.config, tmp_path)
    assert observer.server is None  # off unless supervisor.metrics_port is set
    for now in (0.0, 0.3, 0.6, 1.0, 1.5, 2.1):
        observer.tick(sup, now)
    observer.close(sup, 2.2)
    records = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["elapsed_s"] for r in records] == [0.0, 1.0, 2.1, 2.2]


def test_without_tensorboard_the_log_says_so_in_one_line(tmp_path, monkeypatch, caplog):
    for name in [m for m in sys.modules if m.split(".")[0] == "tensorboard"] + ["tensorboard"]:
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed (imported submodules too)
    with caplog.at_level("INFO", logger="tandem.daemons.supervisor.run_metrics"):
        curves = RunMetricsLog(tmp_path)
    curves.write({"env_steps": 1})
    curves.close()
    assert curves.tensorboard is None and not (tmp_path / "tensorboard").exists()
    assert [r.getMessage() for r in caplog.records if "tensorboard is not installed" in r.getMessage()]


def test_the_kill_message_names_the_grace_that_applied(tmp_path, caplog):
    """A process killed before RUNNING gets start_grace_s (2 s), and the log says so, not stop_grace_s (10 s)."""
    from tandem.daemons.supervisor import states

    sup = make(tmp_path, "supervisor.stop_grace_s=10")
    rec = sup.processes["actor-0"].record
    rec.state = State.STARTING
    states.terminate(rec, "build_env 1/8 over its deadline", now=0.0)
    with caplog.at_level("WARNING", logger="tandem.daemons.supervisor.supervisor"):
        sup.step(2.5)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("killing actor-0")]
    assert said and "after 2.0 s of grace" in said[0] and "still alive 2.5 s after SIGTERM" in said[0], said
