"""The fault drills' run: CartPole with fast heartbeats, ports fixed in advance, on the shared run harness."""

from __future__ import annotations

from pathlib import Path

from tandem.client.harness import RunFailed, UpRun, all_running, live, replaced, rows, tree, updates
from tandem.daemons.config import apply_overrides, config_from_dict, render_toml
from tandem.daemons.settings.schema import RunConfig
from tandem.daemons.supervisor.ports import fix_ports

__all__ = [
    "CARTPOLE",
    "FAST",
    "Run",
    "RunFailed",
    "all_running",
    "live",
    "replaced",
    "rows",
    "tree",
    "updates",
    "write_config",
]

# CartPole-v1 with Double DQN as examples/cartpole.toml has it (pinned, so a drill does not change with the
# example), with fast heartbeats, short grace and backoff so that a drill sees a fault and its repair in seconds.
CARTPOLE = [
    "run.name='chaos'",
    "env.id='CartPole-v1'",
    "env.num_envs=8",
    "algorithm.batch_size=256",
    "algorithm.target_update_interval=100",
    "actors.count=1",
    "eval.enabled=false",
    "stop.seconds=3600.0",
]
FAST = [
    "supervisor.heartbeat_interval_s=0.2",
    "supervisor.liveness_timeout_s=10.0",
    "supervisor.stop_grace_s=2.0",
    "supervisor.backoff_initial_s=0.2",
    "supervisor.backoff_max_s=1.0",
]


def write_config(tmp: Path, overrides: list[str]) -> tuple[RunConfig, Path]:
    """A resolved config with free ports fixed (so a drill knows the learner's), its run dir `tmp`/run."""
    config = fix_ports(config_from_dict(apply_overrides({}, [f"run.dir='{tmp}/run'", *CARTPOLE, *FAST, *overrides])))
    path = tmp / "config.toml"
    path.write_text(render_toml(config))
    return config, path


class Run(UpRun):
    """A drill's `tandem up` in `tmp` (see UpRun; `config_path` puts the config elsewhere, e.g. outside a
    mount it shadows)."""

    def __init__(self, tmp: Path, overrides: list[str], wrap: tuple[str, ...] = (), config_path: Path | None = None):
        self.tmp = tmp
        self.config, path = write_config(tmp, overrides)
        if config_path is not None:
            path = config_path
            path.write_text(render_toml(self.config))
        super().__init__(path, Path(self.config.run.dir), tmp / "up.out", wrap=wrap, cwd=tmp)
