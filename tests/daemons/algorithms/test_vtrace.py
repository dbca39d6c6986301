"""V-trace against a slow reference written from the paper's sum, in float64, with episode ends inside unrolls."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tandem.daemons.algorithms.appo.vtrace import vtrace


def reference_vtrace(log_rhos, rewards, values, bootstrap, terminated, truncated, gamma, rho_bar, c_bar, lam):
    """Loops, float64, straight from Espeholt et al. (2018), eq. 1, for one stream of T steps.

    v_s = V(x_s) + sum_{t=s}^{end} gamma^{t-s} (prod_{i=s}^{t-1} c_i) delta_t, where the sum stops at the
    step that ends the episode (or the unroll). `bootstrap[t]` is the value of the state after step t:
    V(x_{t+1}), the truncated episode's last observation, or the state after the unroll.
    """
    steps = len(rewards)
    rho = np.exp(log_rhos)
    ended = [terminated[t] or truncated[t] for t in range(steps)]

    def delta(t):
        next_value = 0.0 if terminated[t] else bootstrap[t]
        return min(rho_bar, rho[t]) * (rewards[t] + gamma * next_value - values[t])

    vs = np.zeros(steps)
    for s in range(steps):
        total, weight = 0.0, 1.0
        for t in range(s, steps):
            total += weight * delta(t)
            if ended[t]:
                break
            weight *= gamma * lam * min(c_bar, rho[t])
        vs[s] = values[s] + total
    adv = np.zeros(steps)
    for t in range(steps):
        if terminated[t]:
            target_next = 0.0
        elif truncated[t] or t == steps - 1:
            target_next = bootstrap[t]
        else:
            target_next = vs[t + 1]
        adv[t] = min(rho_bar, rho[t]) * (rewards[t] + gamma * target_next - values[t])
    return vs, adv


def random_streams(rng, steps, streams):
    """Inputs for [T, N]: random rewards, values, ratios and episode ends (terminated or truncated)."""
    log_rhos = rng.normal(0.0, 0.7, (steps, streams))
    rewards = rng.normal(0.0, 1.0, (steps, streams))
    values = rng.normal(0.0, 2.0, (steps + 1, streams))  # V(x_0..x_T)
    ends = rng.random((steps, streams))
    terminated = ends < 0.1
    truncated = (ends >= 0.1) & (ends < 0.2)
    final_values = rng.normal(0.0, 2.0, (steps, streams))  # V(last obs) where an episode was truncated
    bootstrap = np.where(truncated, final_values, values[1:])
    return log_rhos, rewards, values, bootstrap, terminated, truncated


def run_vtrace(log_rhos, rewards, values, bootstrap, terminated, truncated, gamma, rho_bar, c_bar, lam):
    t = lambda a: torch.as_tensor(np.asarray(a, np.float64))  # noqa: E731
    out = vtrace(
        t(log_rhos),
        t(rewards),
        t(values[:-1]),
        t(bootstrap),
        gamma * (1.0 - t(terminated)),
        1.0 - t(terminated | truncated),
        rho_clip=rho_bar,
        c_clip=c_bar,
        lam=lam,
    )
    return out.vs.numpy(), out.pg_advantages.numpy()


@pytest.mark.parametrize("seed", range(8))
def test_vtrace_matches_the_reference_sum_with_episode_ends_inside_unrolls(seed):
    rng = np.random.default_rng(seed)
    steps, streams = int(rng.integers(1, 21)), int(rng.integers(1, 7))
    gamma, lam = float(rng.uniform(0.8, 1.0)), float(rng.choice([1.0, rng.uniform(0.5, 1.0)]))
    rho_bar, c_bar = float(rng.uniform(0.5, 2.0)), float(rng.uniform(0.5, 2.0))
    inputs = random_streams(rng, steps, streams)
    vs, adv = run_vtrace(*inputs, gamma, rho_bar, c_bar, lam)
    log_rhos, rewards, values, bootstrap, terminated, truncated = inputs
    for n in range(streams):
        ref_vs, ref_adv = reference_vtrace(
            log_rhos[:, n],
            rewards[:, n],
            values[:-1, n],
            bootstrap[:, n],
            terminated[:, n],
            truncated[:, n],
            gamma,
            rho_bar,
            c_bar,
            lam,
        )
        np.testing.assert_allclose(vs[:, n], ref_vs, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(adv[:, n], ref_adv, rtol=1e-10, atol=1e-10)


def test_the_reference_sees_episode_ends_and_unroll_ends():
    """The cases that matter, on a hand-made stream: terminated, truncated, and the unroll's last step."""
    rewards = np.array([1.0, 1.0, 1.0, 1.0])
    values = np.zeros(4)
    bootstrap = np.array([0.0, 10.0, 0.0, 100.0])  # V after step 1 (truncated) = 10; V after the unroll = 100
    terminated = np.array([False, False, True, False])
    truncated = np.array([False, True, False, False])
    vs, _ = reference_vtrace(np.zeros(4), rewards, values, bootstrap, terminated, truncated, 0.5, 1.0, 1.0, 1.0)
    np.testing.assert_allclose(vs, [1 + 0.5 * (1 + 0.5 * 10), 1 + 0.5 * 10, 1.0, 1 + 0.5 * 100])


@pytest.mark.parametrize("seed", range(4))
def test_on_policy_vtrace_is_the_n_step_return_to_the_episode_or_unroll_end(seed):
    """With behaviour = target (rho = 1) and lambda = 1, v_s is the discounted rewards to the end of the
    episode or unroll, plus the bootstrap value there (0 after a terminal step)."""
    rng = np.random.default_rng(100 + seed)
    steps, streams, gamma = 12, 5, 0.9
    _, rewards, values, bootstrap, terminated, truncated = random_streams(rng, steps, streams)
    vs, adv = run_vtrace(
        np.zeros((steps, streams)), rewards, values, bootstrap, terminated, truncated, gamma, 1.0, 1.0, 1.0
    )
    for n in range(streams):
        for s in range(steps):
            ret, discount, t = 0.0, 1.0, s
            while True:
                ret += discount * rewards[t, n]
                discount *= gamma
                if terminated[t, n]:
                    break
                if truncated[t, n] or t == steps - 1:
                    ret += discount * bootstrap[t, n]
                    break
                t += 1
            assert vs[s, n] == pytest.approx(ret, abs=1e-9)
    # and the advantages are the one-step TD errors on those targets
    for n in range(streams):
        for t in range(steps):
            after = (
                0.0 if terminated[t, n] else (bootstrap[t, n] if truncated[t, n] or t == steps - 1 else vs[t + 1, n])
            )
            assert adv[t, n] == pytest.approx(rewards[t, n] + gamma * after - values[t, n], abs=1e-9)


def test_clipping_bounds_the_correction_of_an_off_policy_step():
    """A step the target policy likes far more than the behaviour one (rho = e^3) counts at most rho_bar."""
    rewards, values = np.ones((1, 1)), np.zeros((2, 1))
    no_ends = np.zeros((1, 1), bool)
    vs, adv = run_vtrace(np.full((1, 1), 3.0), rewards, values, np.zeros((1, 1)), no_ends, no_ends, 0.99, 1.0, 1.0, 1.0)
    assert vs[0, 0] == pytest.approx(1.0) and adv[0, 0] == pytest.approx(1.0)
    vs, _ = run_vtrace(np.full((1, 1), -3.0), rewards, values, np.zeros((1, 1)), no_ends, no_ends, 0.99, 1.0, 1.0, 1.0)
    assert vs[0, 0] == pytest.approx(np.exp(-3.0))  # a step the target policy would rarely take counts little
