"""REINFORCE with a learned value baseline: an algorithm of your own, outside the package.

`examples/cartpole_reinforce.toml` picks it with `algorithm.name = "reinforce_baseline:REINFORCE"` (a module
beside the config is on the daemons' import path). On-policy, Discrete actions, trained on whole unrolls from
the built-in unroll feed. The docs' guide "Your own algorithm" walks through it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tandem.algorithms import AlgorithmSection, AlgorithmSpec, option, redefault  # the plug-in surface, one module


@dataclass
class REINFORCESection(AlgorithmSection):
    """[algorithm] of reinforce_baseline: the shared keys, and two of its own."""

    name: str = redefault(AlgorithmSection, "name", "reinforce_baseline:REINFORCE")
    value_coef: float = option(0.5, "Weight of the baseline's squared error.", min=0.0)
    entropy_coef: float = option(0.01, "Weight of the entropy bonus.", min=0.0)


def check_action_space(action_space) -> None:
    if type(action_space).__name__ != "Discrete":
        raise ValueError(f"reinforce_baseline needs Discrete actions, not {action_space}")


def make_learner(config, obs_space, action_space, device, mask_size):
    import torch  # the factories import torch: reading a config never does

    from tandem.algorithms import build_network, gradient_step

    class Learner:
        def __init__(self):
            self.cfg = config.algorithm
            torch.manual_seed(config.run.seed)
            self.policy = build_network(config.model, obs_space, int(action_space.n))  # logits
            self.value = build_network(config.model, obs_space, 1)  # the baseline
            params = [*self.policy.parameters(), *self.value.parameters()]
            self.optimizer = torch.optim.Adam(params, lr=self.cfg.learning_rate)

        def check_batch(self, batch):
            if (
                batch.actions.dtype.kind not in "iu"
                or not ((batch.actions >= 0) & (batch.actions < action_space.n)).all()
            ):
                raise ValueError(f"actions must be integers in [0, {action_space.n})")

        def v(self, obs):  # the baseline's values of observations [N, ...] (no gradient)
            return self.value(torch.as_tensor(obs, dtype=torch.float32)).squeeze(-1).numpy()

        def returns(self, u, values_next):
            """Discounted returns to the unroll's end; the baseline stands in for what lies beyond it."""
            g, out = values_next[-1], np.zeros_like(u.rewards)
            for t in reversed(range(len(u.rewards))):
                g = np.where(u.terminated[t], 0.0, np.where(u.truncated[t], values_next[t], g))
                g = out[t] = u.rewards[t] + self.cfg.gamma * g
            return out

        def update(self, unrolls):
            from tandem.algorithms import UpdateResult

            obs, acts, rets = [], [], []
            for u in unrolls:
                with torch.no_grad():  # V(next obs); a truncated episode's own last observation where it ended
                    nxt = self.v(u.obs[1:].reshape(-1, *u.obs.shape[2:])).reshape(u.rewards.shape)
                    t, k = np.nonzero(u.truncated)
                    if len(t):
                        nxt[t, k] = self.v(u.final_obs)
                obs.append(u.obs[:-1].reshape(-1, *u.obs.shape[2:]))
                acts.append(u.actions.reshape(-1))
                rets.append(self.returns(u, nxt).reshape(-1))
            obs = torch.as_tensor(np.concatenate(obs), dtype=torch.float32)
            acts = torch.as_tensor(np.concatenate(acts), dtype=torch.long)
            rets = torch.as_tensor(np.concatenate(rets), dtype=torch.float32)
            values = self.value(obs).squeeze(-1)
            adv = rets - values.detach()
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            dist = torch.distributions.Categorical(logits=self.policy(obs))
            pg_loss = -(dist.log_prob(acts) * adv).mean()
            value_loss = ((rets - values) ** 2).mean()
            entropy = dist.entropy().mean()
            loss = pg_loss + self.cfg.value_coef * value_loss - self.cfg.entropy_coef * entropy
            params = [p for g in self.optimizer.param_groups for p in g["params"]]
            gradient_step(self.optimizer, loss, params, self.cfg.max_grad_norm)
            metrics = {
                "loss": loss.item(),
                "pg_loss": pg_loss.item(),
                "value_loss": value_loss.item(),
                "entropy": entropy.item(),
            }
            return UpdateResult(metrics)

        def weights(self):  # what the actors act with: the policy network
            return {k: v.detach().numpy().copy() for k, v in self.policy.state_dict().items()}

        def state_dict(self):
            return {
                "algorithm": config.algorithm.name,  # `tandem eval` and `export` check it against the run's config
                "policy": self.policy.state_dict(),
                "value": self.value.state_dict(),
                "optimizer": self.optimizer.state_dict(),
            }

        def load_state_dict(self, state):
            self.policy.load_state_dict(state["policy"])
            self.value.load_state_dict(state["value"])
            self.optimizer.load_state_dict(state["optimizer"])

    return Learner()


def make_policy(config, obs_space, action_space, seed, mask_size):
    import torch

    from tandem.algorithms import build_network

    class Policy:
        def __init__(self):
            self.generator = torch.Generator().manual_seed(seed or 0)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed or 0)
                self.net = build_network(config.model, obs_space, int(action_space.n))

        def explore(self, obs, epsilons):  # sample from the policy (epsilons play no part)
            with torch.no_grad():
                probs = torch.softmax(self.net(torch.as_tensor(obs, dtype=torch.float32)), -1)
            return torch.multinomial(probs, 1, generator=self.generator).squeeze(-1).numpy(), {}

        def act(self, obs, epsilons):  # the most likely action, for the evaluator
            with torch.no_grad():
                return self.net(torch.as_tensor(obs, dtype=torch.float32)).argmax(-1).numpy()

        def load_weights(self, tensors):
            self.net.load_state_dict({k: torch.as_tensor(v) for k, v in tensors.items()})

    return Policy()


def make_feed(config, obs_space, action_space):
    from tandem.algorithms import UnrollFeed  # whole unrolls, batch_size transitions an update

    return UnrollFeed(config.algorithm.batch_size, config.learner.max_lag)


REINFORCE = AlgorithmSpec(
    name="reinforce_baseline",
    summary="REINFORCE with a learned value baseline (an example plug-in).",
    section=REINFORCESection,
    check_action_space=check_action_space,
    make_learner=make_learner,
    make_policy=make_policy,
    make_feed=make_feed,
    acting_network="policy",
    on_policy=True,
    defaults={"learner": {"max_lag": 4}},
)
