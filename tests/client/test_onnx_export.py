"""`tandem export --format onnx`: every policy kind exports, and ONNX Runtime acts as torch does on a thousand
observations of the real env (greedy actions the same; log-probabilities, Q-values, means and values within 1e-4,
or 1e-5 of their size)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tandem import load_policy
from tandem.client.api.onnx_export import export_onnx, graph_of, onnx_spec
from tandem.client.api.trained import PolicyError
from tandem.daemons.algorithms import make_algorithm
from tandem.daemons.checkpoints.files import save_checkpoint
from tandem.daemons.config import load_config, render_toml
from tandem.daemons.envs.gym_envs import make_env
from tandem.daemons.envs.probe import probe_policy_spaces

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (make test installs it)")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
OBSERVATIONS = 1000
# float32 on both sides: a large value (a Pong CNN's, scaled up) differs in its 7th digit
TOLERANCE, RELATIVE = 1e-4, 1e-5
CASES = {
    "mlp": ("cartpole_appo.toml", []),
    "gaussian": ("pendulum_appo.toml", []),
    "lstm": ("cartpole_lstm.toml", []),
    "dict": ("minigrid_doorkey.toml", []),
    "cnn": ("pong_appo.toml", []),
    "dqn": ("cartpole.toml", []),
    "sac": ("pendulum_sac.toml", []),
}


@pytest.fixture
def trained(tmp_path, monkeypatch):
    """trained(example, *overrides) -> a loaded policy of that example, its weights scaled up (a fresh network is
    near-uniform: its greedy actions would all agree by chance), and its config."""
    monkeypatch.syspath_prepend(str(EXAMPLES))

    def build(example: str, *overrides: str):
        run = tmp_path / "run"
        run.mkdir(exist_ok=True)
        config = load_config(EXAMPLES / example, [f"run.dir='{run}'", *overrides])
        (run / "config.toml").write_text(render_toml(config))
        spaces = probe_policy_spaces(config)
        algorithm = make_algorithm(config, spaces.observation_space, spaces.action_space, "cpu")
        with torch.no_grad():  # every network the learner holds (the actor-critic, the Q-networks, SAC's actor)
            for net in [v for v in vars(algorithm).values() if isinstance(v, torch.nn.Module)]:
                for name, param in net.named_parameters():
                    if "norm" not in name:
                        param.mul_(5.0)
        save_checkpoint(run / "learner-default", {"algorithm": algorithm.state_dict(), "version": 3, "updates": 1})
        return load_policy(run), config

    return build


def observations(config, count: int = OBSERVATIONS):
    """`count` observations of the real env under random actions, as a batch (per key for a Dict)."""
    env = make_env(config.env)
    obs, _ = env.reset(seed=0)
    rows = []
    for _ in range(count):
        rows.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    if isinstance(rows[0], dict):
        return {key: np.stack([r[key] for r in rows]) for key in rows[0]}
    return np.stack(rows)


def feed_of(session, batch, state=None) -> dict:
    names = [i.name for i in session.get_inputs()]
    if isinstance(batch, dict):
        feed = {f"obs.{key}": value for key, value in batch.items()}
    else:
        feed = {"obs": batch}
    if state is not None:
        feed["state"] = state
    assert set(feed) == set(names), (sorted(feed), names)
    return feed


@pytest.mark.parametrize("kind", sorted(CASES))
def test_every_policy_kind_acts_in_onnx_runtime_as_in_torch(tmp_path, trained, kind):
    example, overrides = CASES[kind]
    policy, config = trained(example, *overrides)
    path = export_onnx(policy, tmp_path / "out")
    assert onnx_spec(path)["policy"] == "default"
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    batch = observations(config)
    state = np.zeros((OBSERVATIONS, policy.state_size), np.float32) if policy.recurrent else None
    got = session.run(None, feed_of(session, batch, state))
    names = [o.name for o in session.get_outputs()]
    theirs = dict(zip(names, got))
    # the Tandem path a game or `tandem eval` acts with
    mine = policy.act(batch, state=state.copy()) if state is not None else policy.act(batch)
    action = theirs["action"].reshape(np.shape(mine))
    if np.issubdtype(np.asarray(mine).dtype, np.floating):
        np.testing.assert_allclose(action, mine, atol=TOLERANCE)
    else:
        assert (action == mine).mean() >= 0.999, (action[:10], mine[:10])
    # the distribution's parameters, against the same graph in torch
    graph, inputs, _ = graph_of(policy)
    with torch.no_grad():
        feed = feed_of(session, batch, state)
        reference = graph(*[torch.as_tensor(feed[name]) for name, _ in inputs])
    # the comparison means something: what the network gives differs from one observation to the next
    assert float(np.std(theirs[names[1]], axis=0).max()) > 1e-3, names[1]
    for name, value in zip(names[1:], reference[1:]):
        finite = np.isfinite(value.numpy())
        np.testing.assert_allclose(
            theirs[name][finite], value.numpy()[finite], atol=TOLERANCE, rtol=RELATIVE, err_msg=name
        )


def test_an_action_mask_is_an_input_and_masked_actions_are_never_chosen():
    """A policy whose observation ends with an action mask (multi-agent games): the ONNX file takes the mask as
    its own input, and the greedy action is always a legal one."""
    import gymnasium as gym

    from tandem.client.api.onnx_graph import ActorCriticGraph
    from tandem.daemons.algorithms.actor_critic import seeded_actor_critic
    from tandem.daemons.config import load_config

    config = load_config(EXAMPLES / "cartpole_appo.toml", [])
    space = gym.spaces.Box(-np.inf, np.inf, (6 + 4,), np.float32)
    net = seeded_actor_critic(config, space, gym.spaces.Discrete(4), 4, seed=0)
    with torch.no_grad():
        for p in net.parameters():
            p.mul_(5.0)
    graph = ActorCriticGraph(net, None, 4, gym.spaces.Discrete(4)).eval()
    rng = np.random.default_rng(0)
    obs = torch.as_tensor(rng.standard_normal((OBSERVATIONS, 6)).astype(np.float32))
    mask = torch.as_tensor((rng.random((OBSERVATIONS, 4)) < 0.5).astype(np.float32))
    mask[:, 2] = 1.0  # at least one legal action
    path = Path(__import__("tempfile").mkdtemp()) / "masked.onnx"
    torch.onnx.export(graph, (obs[:2], mask[:2]), str(path), input_names=["obs", "action_mask"],
                      output_names=["action", "log_probs", "value"],
                      dynamic_axes={n: {0: "batch"} for n in ("obs", "action_mask", "action", "log_probs", "value")},
                      dynamo=False)  # fmt: skip
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    action, log_probs, _ = session.run(None, {"obs": obs.numpy(), "action_mask": mask.numpy()})
    assert mask.numpy()[np.arange(OBSERVATIONS), action].all()
    with torch.no_grad():
        reference = graph(obs, mask)
    assert (action == reference[0].numpy()).all()


@pytest.mark.parametrize(
    "features",
    [
        (),
        ("algorithm.normalize_obs=true", "model.entity_origin='unit'", "model.entity_heading=2"),
        ("model.entity_relpos=[1, 1]",),
    ],
    ids=["as-they-are", "normalized-turned", "relative-positions"],
)
def test_an_entity_policy_exports_every_padded_row_and_acts_as_its_trimmed_self(tmp_path, trained, features):
    """The ONNX graph keeps every padded row (fixed shapes) where torch cuts each batch to its most entities: the
    greedy actions are the same; OnnxAgent pads the env's own observation and gives one action per head. Positions
    turned into a unit's frame, scaled features and relative positions inside attention are in the graph too."""
    from tandem.client.onnx_agent import OnnxAgent

    policy, config = trained("entity_skirmish.toml", "env.max_entities=8", *features)
    if "algorithm.normalize_obs=true" in features:  # statistics far from 0 and 1: the graph must scale as torch does
        with torch.no_grad():
            for norm in policy.net.nets.current.obs_norm.values():
                norm.mean.uniform_(-2.0, 2.0)
                norm.var.uniform_(0.05, 4.0)
    path = export_onnx(policy, tmp_path / "out")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    batch = observations(config)
    got = session.run(None, feed_of(session, batch))
    np.testing.assert_array_equal(got[0], policy.act(batch))
    game = __import__("entity_skirmish").make()
    env = make_env(config.env)
    agent = OnnxAgent(path)
    for seed in range(5):
        raw, _ = game.reset(seed=seed)
        padded, _ = env.reset(seed=seed)  # the same field through Tandem's own wrapper
        action = agent.act(raw)
        expected = env.rows.env_action(policy.act(padded), padded)  # make_env's EntityEnv (no time limit here)
        assert set(action) == {"target", "stance"}
        for head in action:
            np.testing.assert_array_equal(action[head], expected[head])


def test_a_recurrent_entity_policy_is_refused_by_name_before_anything_is_written(tmp_path, trained):
    policy, _ = trained(
        "entity_skirmish.toml", "env.max_entities=8", "model.core='gru'", "algorithm.minibatch_by='unrolls'"
    )
    with pytest.raises(PolicyError, match="ONNX export does not take a recurrent entity policy yet"):
        export_onnx(policy, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", ["mlp", "gaussian", "lstm", "dict", "cnn"])
def test_a_game_playing_the_onnx_file_in_process_returns_what_tandem_eval_does(tmp_path, trained, kind):
    """5 episodes, the same seeds: OnnxAgent (ONNX Runtime in the game's process) against TrainedPolicy.act, the
    path `tandem eval` plays with; both greedy."""
    from tandem.client.onnx_agent import OnnxAgent

    example, overrides = CASES[kind]
    policy, config = trained(example, *overrides)
    agent = OnnxAgent(export_onnx(policy, tmp_path / "out"))
    returns = {"onnx": [], "tandem": []}
    for who in returns:
        env = make_env(config.env, training=False)
        for seed in range(5):
            obs, _ = env.reset(seed=seed)
            agent.reset()
            policy.reset()
            total, done = 0.0, False
            while not done:
                action = agent.act(obs) if who == "onnx" else policy.act(obs)
                obs, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                done = terminated or truncated
            returns[who].append(total)
        env.close()
    np.testing.assert_allclose(returns["onnx"], returns["tandem"], rtol=1e-4)
