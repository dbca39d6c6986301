"""The entity policy on Skirmish (examples/entity_skirmish.py): what the actor acted with is what the learner scores
after the wire, the entities' order does not matter, masks hold, and a selected entity is one of the same step."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from tandem import load_exported, load_policy
from tandem.client.api.export import export_policy
from tandem.daemons.algorithms import make_algorithm
from tandem.daemons.algorithms.unroll_tensors import BEHAVIOUR_LOGP, stack_unrolls
from tandem.daemons.checkpoints.files import save_checkpoint
from tandem.daemons.config import load_config, render_toml
from tandem.daemons.envs.entity_env import NO_ACTION, EntityEnv
from tandem.daemons.envs.probe import probe_policy_spaces
from tests.daemons.unrolls import collect, wire
from tests.protocol.samples import unchecked_frames

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CONFIG = EXAMPLES / "entity_skirmish.toml"
STEPS, ENVS, BOUND = 16, 3, 8

pytestmark = pytest.mark.usefixtures("examples_on_path")


def skirmish_config(tmp_path, *more):
    return load_config(
        CONFIG,
        [f"run.dir='{tmp_path}'", f"env.num_envs={ENVS}", f"actors.unroll_length={STEPS}", f"env.max_entities={BOUND}"]
        + [f"algorithm.batch_size={STEPS * ENVS}", *more],
    )


def sharp(config):
    """A learner whose policy depends strongly on what it sees (a fresh one is near-uniform)."""
    spaces = probe_policy_spaces(config)
    algorithm = make_algorithm(config, spaces.observation_space, spaces.action_space, "cpu")
    with torch.no_grad():
        for p in algorithm.net.parameters():
            p.mul_(3.0)
    return algorithm


def obs_batch(env: EntityEnv, seeds) -> dict[str, torch.Tensor]:
    rows = [env.reset(seed=s)[0] for s in seeds]
    return {k: torch.as_tensor(np.stack([r[k] for r in rows])) for k in rows[0]}


@pytest.mark.parametrize(
    "model",
    [
        ("model.kind='auto'",),
        ("model.kind='mlp'",),
        ("model.core='gru'", "algorithm.minibatch_by='unrolls'"),
        ("model.entity_relpos=[1, 1]",),
    ],
    ids=["attention", "padded-mlp", "attention-gru", "relative-positions"],
)
def test_the_learner_scores_the_actors_actions_exactly_after_the_ragged_wire(tmp_path, model):
    config = skirmish_config(tmp_path, *model, "env.kwargs={length=5}")
    algorithm = sharp(config)
    unrolls = collect(config, 2, algorithm.weights())
    counts = np.concatenate([u.obs["count:unit"].ravel() for u in unrolls])
    assert counts.min() >= 1 and counts.max() <= 4 and len(set(counts.tolist())) > 1  # a varying set of units
    assert any(u.truncated.any() for u in unrolls)  # final observations go ragged too
    logp = np.concatenate([u.extras[BEHAVIOUR_LOGP].ravel() for u in unrolls])
    assert logp.std() > 0.1
    for u in unrolls:
        got = wire(u)
        for key in u.obs:
            assert got.obs[key].tobytes() == u.obs[key].tobytes()
        d = stack_unrolls([got], algorithm.net.head, algorithm.device, 1.0)
        with torch.no_grad():
            _, learner_logp, _ = algorithm.evaluate_unrolls(d)
        np.testing.assert_allclose(learner_logp.numpy(), u.extras[BEHAVIOUR_LOGP], atol=5e-4)
    assert np.isfinite(algorithm.update([wire(u) for u in unrolls]).metrics["loss"])


@pytest.mark.parametrize("more", [(), ("model.entity_relpos=[1, 1]",)], ids=["attention", "relative-positions"])
def test_permuting_the_entities_of_a_step_permutes_the_policy_and_leaves_the_rest(tmp_path, more):
    config = skirmish_config(tmp_path, *more)
    net = sharp(config).net
    env = EntityEnv(__import__("entity_skirmish").make(max_units=4, max_enemies=6), BOUND)
    for seed in range(100):  # the first field with a few units and enemies to permute
        obs, _ = env.reset(seed=seed)
        units, enemies = int(obs["count:unit"]), int(obs["count:enemy"])
        if units >= 3 and enemies >= 4:
            break
    rng = np.random.default_rng(0)
    pu, pe = rng.permutation(units), rng.permutation(enemies)
    perm = {k: v.copy() for k, v in obs.items()}
    perm["unit"][:units] = obs["unit"][pu]
    perm["enemy"][:enemies] = obs["enemy"][pe]
    perm["targets:target"][:enemies] = obs["targets:target"][pe]
    batch = {k: torch.as_tensor(np.stack([obs[k], perm[k]])) for k in obs}
    with torch.no_grad():
        dist, values = net.forward_all(batch)
    assert abs(float(values[0] - values[1])) < 1e-5
    probs = dict(zip([h.name for h in net.layout.heads], dist.probs()))
    target, stance = probs["target"], probs["stance"]  # [B, units, enemies] and [B, units, 2]
    # unit i of the permuted step is unit pu[i]; enemy j of it is enemy pe[j]
    np.testing.assert_allclose(stance[1, :units].numpy(), stance[0, pu].numpy(), atol=1e-5)
    np.testing.assert_allclose(target[1, :units, :enemies].numpy(), target[0][pu][:, pe].numpy(), atol=1e-5)
    assert target[0, :units, :enemies].std() > 0.01  # the probabilities differ between enemies: this means something


def test_masked_and_absent_entities_are_never_chosen_and_a_target_is_one_of_the_same_step(tmp_path):
    config = skirmish_config(tmp_path)
    net = sharp(config).net
    env = EntityEnv(__import__("entity_skirmish").make(max_units=4, max_enemies=6), BOUND)
    batch = obs_batch(env, range(64))
    enemies = batch["count:enemy"].numpy()
    alive = batch["targets:target"].numpy().astype(bool)
    units = batch["count:unit"].numpy()
    assert (~alive[np.arange(BOUND) < enemies[:, None]]).any()  # some present enemies are wrecks
    head = next(h for h in net.layout.heads if h.name == "target")
    with torch.no_grad():
        dist = net.distribution(batch)
        picks = torch.cat([dist.sample(torch.Generator().manual_seed(s)) for s in range(20)]).numpy()
    rows = np.tile(np.arange(64), 20)
    targets = picks[:, head.offset : head.offset + BOUND]
    for r, chosen in zip(rows, targets):
        n, m = units[r], enemies[r]
        assert (chosen[n:] == 0).all()  # slots past the units are 0
        assert (chosen[:n] < m).all()  # an enemy of this very step
        assert alive[r][chosen[:n]].all()  # and a living one
    # the env turns the slots into one entry per unit, and a unit with nothing to pick gets NO_ACTION
    obs, _ = env.reset(seed=5)
    obs["targets:target"][:] = 0
    env.rows.masks["targets:target"] = obs["targets:target"]
    action = env.rows.env_action(np.zeros(env.action_space.shape, np.int64))
    assert (action["target"] == NO_ACTION).all() and len(action["target"]) == int(obs["count:unit"])


def test_a_step_alone_and_in_a_batch_with_more_entities_acts_the_same(tmp_path):
    """A batch is cut to its most entities: padding rows, and how many there are, must change nothing."""
    config = skirmish_config(tmp_path)
    net = sharp(config).net
    env = EntityEnv(__import__("entity_skirmish").make(max_units=4, max_enemies=6), BOUND)
    batch = obs_batch(env, range(16))
    small = int(np.argmin(batch["count:enemy"].numpy() + batch["count:unit"].numpy()))
    alone = {k: v[small : small + 1] for k, v in batch.items()}
    with torch.no_grad():
        together, v_together = net.forward_all(batch)
        one, v_one = net.forward_all(alone)
    assert abs(float(v_one[0] - v_together[small])) < 1e-5
    actions = together.mode()[small : small + 1]
    assert torch.allclose(one.log_prob(actions), together.log_prob(together.mode())[small : small + 1], atol=1e-5)


def test_the_learner_counts_a_ragged_batch_that_does_not_add_up_and_one_of_another_width(tmp_path, built_learner):
    config = skirmish_config(tmp_path)
    learner = built_learner(config)
    good = dataclasses.replace(collect(config, 1)[0], policy_version=0)
    counts = learner.progress.counts
    learner.intake.handle(unchecked_frames(good))
    assert counts["transitions_inserted"] == STEPS * ENVS and counts["batches_malformed"] == 0, counts
    over = dict(good.obs, **{"count:unit": np.full_like(good.obs["count:unit"], BOUND + 1)})
    learner.intake.handle(unchecked_frames(dataclasses.replace(good, obs=over)))
    assert counts["batches_malformed"] == 1 and counts["malformed_entities"] == 1, counts
    wide = {k: (np.concatenate([v, v[..., :1]], -1) if k == "unit" else v) for k, v in good.obs.items()}
    wide_final = {k: (np.concatenate([v, v[..., :1]], -1) if k == "unit" else v) for k, v in good.final_obs.items()}
    learner.intake.handle(unchecked_frames(dataclasses.replace(good, obs=wide, final_obs=wide_final)))
    assert counts["batches_malformed"] == 2 and counts["malformed_obs_shape"] == 1, counts
    assert learner.train_step() and np.isfinite(learner.training.last_metrics["loss"])


@pytest.mark.parametrize(
    "normalize, turn",
    [(False, ()), (True, ("model.entity_origin='unit'", "model.entity_heading=2"))],
    ids=["raw", "normalized-turned"],
)
def test_an_exported_entity_policy_acts_as_the_trained_one(tmp_path, normalize, turn):
    run = tmp_path / "run"
    config = skirmish_config(run, f"algorithm.normalize_obs={str(normalize).lower()}", *turn)
    run.mkdir()
    (run / "config.toml").write_text(render_toml(config))
    algorithm = sharp(config)
    if normalize:  # statistics far from mean 0, variance 1: the exports must scale as the learner's network does
        for norm in algorithm.net.obs_norm.values():
            norm.mean.uniform_(-2.0, 2.0)
            norm.var.uniform_(0.05, 4.0)
    save_checkpoint(run / "learner-default", {"algorithm": algorithm.state_dict(), "version": 3, "updates": 1})
    policy = load_policy(run)
    exported = load_exported(export_policy(policy, tmp_path / "out").parent)
    assert exported.action_space.heads == algorithm.net.layout.heads  # the heads' layout travels in policy.json
    env = EntityEnv(__import__("entity_skirmish").make(), BOUND)
    for seed in range(5):
        obs, _ = env.reset(seed=seed)
        batch = {k: torch.as_tensor(v[None]) for k, v in obs.items()}
        with torch.no_grad():
            expected = algorithm.net.greedy(batch)[0].numpy()
        np.testing.assert_array_equal(policy.act(obs), expected)
        np.testing.assert_array_equal(exported.act(obs), expected)


def test_hybrid_actions_travel_as_floats_and_the_learner_scores_them_exactly(tmp_path):
    """A plain env with a Discrete head beside a Box head (examples/aim_and_fire.py): one float32 action vector,
    the choice held as a whole number, the aim as the unclipped sample; the env gets each head in its form."""
    config = skirmish_config(tmp_path, "env.id='aim_and_fire:make'", "env.kwargs={length=5}")
    algorithm = sharp(config)
    space = algorithm.net.head.space
    assert space.dtype == np.float32
    assert sorted(h.kind for h in space.heads) == ["box", "global"]
    unrolls = collect(config, 2, algorithm.weights())
    actions = np.concatenate([u.actions.reshape(-1, 3) for u in unrolls])
    fire = next(h for h in space.heads if h.kind == "global").offset
    assert actions.dtype == np.float32 and set(np.unique(actions[:, fire]).tolist()) <= {0.0, 1.0}
    for u in unrolls:
        d = stack_unrolls([wire(u)], algorithm.net.head, algorithm.device, 1.0)
        with torch.no_grad():
            _, learner_logp, _ = algorithm.evaluate_unrolls(d)
        np.testing.assert_allclose(learner_logp.numpy(), u.extras[BEHAVIOUR_LOGP], atol=5e-4)
    assert np.isfinite(algorithm.update([wire(u) for u in unrolls]).metrics["loss"])
    env = EntityEnv(__import__("aim_and_fire").make(), 1)
    env.reset(seed=0)
    vector = np.zeros(3, np.float32)
    vector[fire] = 1.0
    taken = env.rows.env_action(vector)
    assert taken["fire"] == 1 and taken["aim"].dtype == np.float32 and taken["aim"].shape == (2,)


def test_a_tuple_of_heads_gets_a_tuple_back():
    import gymnasium as gym

    class TupleActions(gym.Env):
        observation_space = gym.spaces.Box(-1, 1, (3,), np.float32)
        action_space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (1,), np.float32)))

    env = EntityEnv(TupleActions(), 1)
    assert [h.name for h in env.layout.heads] == ["0", "1"] and env.observation_space["global"].shape == (3,)
    taken = env.rows.env_action(np.array([2.0, 0.5], np.float32), env.rows.pad(np.zeros(3, np.float32)))
    assert isinstance(taken, tuple) and taken[0] == 2 and taken[1].tolist() == [0.5]


def test_positions_measured_from_an_origin_make_the_policy_blind_to_where_the_whole_field_is(tmp_path):
    """model.entity_origin = 'unit': every x, y is taken from the first unit's, so moving the whole field by an
    offset changes nothing; without an origin it does."""
    env = EntityEnv(__import__("entity_skirmish").make(), BOUND)
    obs, _ = env.reset(seed=3)
    moved = {k: v.copy() for k, v in obs.items()}
    for key in ("unit", "enemy"):
        n = int(obs[f"count:{key}"])
        moved[key][:n, :2] += np.float32(0.375)
    batch = {k: torch.as_tensor(np.stack([obs[k], moved[k]])) for k in obs}
    for origin, same in (("unit", True), ("", False)):
        net = sharp(skirmish_config(tmp_path, f"model.entity_origin='{origin}'")).net
        with torch.no_grad():
            dist, values = net.forward_all(batch)
        probs = [p.numpy() for p in dist.probs()]
        gap = max(float(np.abs(p[0] - p[1]).max()) for p in probs) + abs(float(values[0] - values[1]))
        assert (gap < 1e-4) == same, (origin, gap)


def test_an_origin_that_is_no_type_is_a_setup_error(tmp_path):
    from tandem.daemons.settings.setup_errors import SetupError

    with pytest.raises(SetupError, match="model.entity_origin = 'hero' is not an entity type or 'global'"):
        sharp(skirmish_config(tmp_path, "model.entity_origin='hero'"))
    with pytest.raises(SetupError, match=r"model.entity_position = \[0, 5\]: 'unit' has 3 features"):
        sharp(skirmish_config(tmp_path, "model.entity_origin='unit'", "model.entity_position=[0, 5]"))


def test_normalized_entity_features_count_only_the_entities_present_relative_to_the_origin(tmp_path):
    """algorithm.normalize_obs: each type's statistics are those of its present rows (padding holding anything),
    positions as the policy sees them (relative to model.entity_origin); the learner keeps them as it trains."""
    config = skirmish_config(tmp_path, "algorithm.normalize_obs=true", "model.entity_origin='unit'")
    net = sharp(config).net
    env = EntityEnv(__import__("entity_skirmish").make(), BOUND)
    batch = obs_batch(env, range(40))
    for key in ("unit", "enemy"):  # padding rows full of nonsense must not reach the statistics
        absent = torch.arange(BOUND) >= batch[f"count:{key}"].reshape(-1, 1)
        batch[key][absent] = 1e6
    net.update_obs_norm(batch)
    units, enemies = batch["count:unit"].reshape(-1), batch["count:enemy"].reshape(-1)
    origin = batch["unit"][:, 0, :2]
    expected = []
    for key, counts in (("unit", units), ("enemy", enemies)):
        rows = batch[key].clone()
        rows[..., :2] -= origin[:, None]  # the first unit of each step is the origin: at (0, 0) from there
        expected.append(torch.cat([rows[b, : counts[b]] for b in range(len(counts))]))
    types = [t.name for t in net.layout.types]
    for key, rows in zip(("unit", "enemy"), expected):
        norm = net.obs_norm[str(types.index(key))]
        np.testing.assert_allclose(norm.mean.numpy(), rows.mean(0).numpy(), rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(norm.var.numpy(), rows.var(0, unbiased=False).numpy(), rtol=1e-3, atol=1e-4)
    spaces = probe_policy_spaces(config)
    learner = make_algorithm(config, spaces.observation_space, spaces.action_space, "cpu")
    unrolls = collect(config, 2, learner.weights())
    enemy = str(types.index("enemy"))
    before = learner.net.obs_norm[enemy].count.item()
    learner.update([wire(u) for u in unrolls])
    present = sum(int(u.obs["count:enemy"][:-1].sum()) for u in unrolls)  # obs[T] is bootstrap only
    assert learner.net.obs_norm[enemy].count.item() == pytest.approx(before + present)
    assert f"obs_norm.{enemy}.mean" in learner.weights()  # the statistics travel to actors with the weights
    mlp = skirmish_config(tmp_path, "algorithm.normalize_obs=true", "model.kind='mlp'")
    assert (
        make_algorithm(mlp, spaces.observation_space, spaces.action_space, "cpu").net.obs_norm is None
    )  # the padded MLP baseline takes its rows as they are


def test_positions_turned_by_the_origins_heading_make_the_policy_blind_to_how_the_whole_field_is_turned(tmp_path):
    """model.entity_heading = 2 (read here as each unit's heading in radians, wrapped into [0, 2 pi) as games keep
    them): turning the whole field about the first unit by an angle, and the units' headings with it, changes
    nothing, even where a heading wraps past 2 pi; without a heading it does."""
    env = EntityEnv(__import__("entity_skirmish").make(), BOUND)
    obs, _ = env.reset(seed=3)
    turned = {k: v.copy() for k, v in obs.items()}
    angle = np.float32(0.7)
    cos, sin = np.cos(angle), np.sin(angle)
    pivot = obs["unit"][0, :2].copy()
    for key in ("unit", "enemy"):
        n = int(obs[f"count:{key}"])
        rel = obs[key][:n, :2] - pivot
        turned[key][:n, 0] = pivot[0] + rel[:, 0] * cos - rel[:, 1] * sin
        turned[key][:n, 1] = pivot[1] + rel[:, 0] * sin + rel[:, 1] * cos
    units = int(obs["count:unit"])
    assert units >= 2
    obs["unit"][:units, 2] = np.linspace(6.0, 6.9, units) % (2 * np.pi)  # headings on both sides of 0 = 2 pi
    turned["unit"][:units, 2] = (obs["unit"][:units, 2] + angle) % (2 * np.pi)  # every heading turns with the field
    batch = {k: torch.as_tensor(np.stack([obs[k], turned[k]])) for k in obs}
    for heading, same in ((2, True), (-1, False)):
        net = sharp(skirmish_config(tmp_path, "model.entity_origin='unit'", f"model.entity_heading={heading}")).net
        with torch.no_grad():
            dist, values = net.forward_all(batch)
        gap = max(float(np.abs(p[0] - p[1]).max()) for p in (p.numpy() for p in dist.probs()))
        assert (gap + abs(float(values[0] - values[1])) < 1e-4) == same, (heading, gap)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["model.entity_heading=2"], "model.entity_heading needs model.entity_origin"),
        (["model.entity_origin='unit'", "model.entity_heading=3"], "model.entity_heading = 3: 'unit' has 3 features"),
        (["model.entity_origin='unit'", "model.entity_position=[0]", "model.entity_heading=2"], "must name two"),
        (["model.entity_origin='unit'", "model.entity_heading=1"], r"is one of model.entity_position \[0, 1\]"),
    ],
)
def test_a_heading_without_an_origin_or_beyond_its_features_is_a_setup_error(tmp_path, overrides, message):
    from tandem.daemons.settings.setup_errors import SetupError

    with pytest.raises(SetupError, match=message):
        sharp(skirmish_config(tmp_path, *overrides))


def test_a_checkpoint_saved_without_entity_statistics_loads_with_fresh_ones(tmp_path, caplog):
    """Before normalize_obs scaled entity features, a run that set it saved no statistics: resuming it, and loading
    it for eval or export, starts them afresh with a warning instead of refusing the checkpoint."""
    run = tmp_path / "run"
    run.mkdir()
    old = sharp(skirmish_config(run))  # as such a run's learner saved it: no obs_norm tensors
    config = skirmish_config(run, "algorithm.normalize_obs=true")
    (run / "config.toml").write_text(render_toml(config))
    save_checkpoint(run / "learner-default", {"algorithm": old.state_dict(), "version": 3, "updates": 1})
    spaces = probe_policy_spaces(config)
    resumed = make_algorithm(config, spaces.observation_space, spaces.action_space, "cpu")
    with caplog.at_level("WARNING"):
        resumed.load_state_dict(old.state_dict())
        policy = load_policy(run)
    assert caplog.text.count("no entity feature statistics") == 2
    assert torch.equal(resumed.net.embed["0"].weight, old.net.embed["0"].weight)  # the trained weights are kept
    assert all(float(n.count) < 1e-3 for n in resumed.net.obs_norm.values())  # fresh: the prior's weight only
    env = EntityEnv(__import__("entity_skirmish").make(), BOUND)
    obs, _ = env.reset(seed=1)
    batch = {k: torch.as_tensor(v[None]) for k, v in obs.items()}
    with torch.no_grad():
        expected = resumed.net.greedy(batch)[0].numpy()
    np.testing.assert_array_equal(policy.act(obs), expected)


def test_scaled_global_features_reach_the_global_token_too(tmp_path):
    """The global token (the value, a Discrete head, a recurrent core) reads the global features as scaled: with
    the entities' own view of them removed, changing only the globals' statistics still changes the value."""
    net = sharp(skirmish_config(tmp_path, "algorithm.normalize_obs=true")).net
    obs = obs_batch(EntityEnv(__import__("entity_skirmish").make(), BOUND), range(4))
    g = net.layout.global_size
    with torch.no_grad():
        for layer in net.embed.values():  # the globals beside every entity's features: removed
            layer.weight[:, -g:] = 0.0
        before = net.values(obs)
        net.obs_norm["global"].mean.fill_(0.5)
        after = net.values(obs)
    assert float((before - after).abs().max()) > 1e-4
