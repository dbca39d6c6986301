"""Adam as torch.optim.Adam computes it, without torch.optim, whose constructor imports torch._dynamo (1 s of CPU)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch

# Called with the gradients of every parameter about to be stepped, before each step of every Adam here: data-parallel
# learner replicas average them across the group there (tandem.daemons.learner.replica_group).
STEP_PRE_HOOKS: list[Callable[[list[torch.Tensor]], None]] = []


class Adam:
    """Kingma and Ba's Adam over one group of parameters, the same arithmetic as `torch.optim.Adam` (no amsgrad,
    no weight decay), through the fused kernel torch's own fused Adam calls, or the multi-tensor (`_foreach`)
    kernels where a build or device has none.

    Why not torch's: constructing any `torch.optim` optimizer imports torch._dynamo, which costs a learner about a
    second of CPU before its first update, on a machine where the actors are starting at the same time.
    `state_dict()` has torch's layout, so checkpoints load into either.
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        fused: bool = True,
    ):
        self.fused = fused  # torch's fused kernel where it exists (several times faster on a CNN than foreach)
        self.params = [p for p in params if p.requires_grad]
        self.param_groups = [
            {
                "lr": lr,
                "betas": tuple(betas),
                "eps": eps,
                "weight_decay": 0.0,
                "amsgrad": False,
                "maximize": False,
                "params": list(range(len(self.params))),
            }
        ]
        self.steps = 0
        self.exp_avg = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not live:
            return
        for hook in STEP_PRE_HOOKS:
            hook([self.params[i].grad for i in live])
        self.steps += 1
        tensors = (
            [self.params[i] for i in live],
            [self.params[i].grad for i in live],
            [self.exp_avg[i] for i in live],
            [self.exp_avg_sq[i] for i in live],
        )
        if self.fused:
            try:
                self.fused_step(group, *tensors)
                return
            except (AttributeError, RuntimeError, TypeError):
                self.fused = False  # no fused kernel for this build or device: the multi-tensor path from now on
        self.foreach_step(group, *tensors)

    def fused_step(self, group: dict, params: list, grads: list, exp_avg: list, exp_avg_sq: list) -> None:
        """torch's fused Adam kernel (what torch.optim.Adam(fused=True) calls): one pass over every tensor."""
        beta1, beta2 = group["betas"]
        steps = [torch.full((), float(self.steps), device=p.device) for p in params]  # the kernel's bias correction
        torch._fused_adam_(
            params,
            grads,
            exp_avg,
            exp_avg_sq,
            [],
            steps,
            lr=group["lr"],
            beta1=beta1,
            beta2=beta2,
            weight_decay=0.0,
            eps=group["eps"],
            amsgrad=False,
            maximize=False,
        )

    def foreach_step(self, group: dict, params: list, grads: list, exp_avg: list, exp_avg_sq: list) -> None:
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        torch._foreach_lerp_(exp_avg, grads, 1.0 - beta1)  # m = beta1 m + (1 - beta1) g
        torch._foreach_mul_(exp_avg_sq, beta2)
        torch._foreach_addcmul_(exp_avg_sq, grads, grads, value=1.0 - beta2)  # v = beta2 v + (1 - beta2) g^2
        step_size = lr / (1.0 - beta1**self.steps)
        bias_sqrt = math.sqrt(1.0 - beta2**self.steps)
        denom = torch._foreach_sqrt(exp_avg_sq)
        torch._foreach_div_(denom, bias_sqrt)
        torch._foreach_add_(denom, eps)
        torch._foreach_addcdiv_(params, exp_avg, denom, value=-step_size)  # p -= lr m_hat / (sqrt(v_hat) + eps)

    def state_dict(self) -> dict[str, Any]:
        state = {
            i: {"step": torch.tensor(float(self.steps)), "exp_avg": self.exp_avg[i], "exp_avg_sq": self.exp_avg_sq[i]}
            for i in range(len(self.params))
            if self.steps
        }
        return {"state": state, "param_groups": [dict(group) for group in self.param_groups]}

    def load_state_dict(self, saved: Mapping[str, Any]) -> None:
        """Load this class's or torch.optim.Adam's state dict; ValueError when it is for other parameters."""
        try:
            groups, state = saved["param_groups"], saved["state"]
            group = groups[0]
        except (KeyError, IndexError, TypeError) as exc:
            raise ValueError(f"not an Adam state dict ({type(exc).__name__}: {exc})") from exc
        if len(groups) != 1 or len(group.get("params", ())) != len(self.params):
            raise ValueError(
                f"optimizer state is for {sum(len(g.get('params', ())) for g in groups)} parameters, "
                f"this network has {len(self.params)}"
            )
        steps = 0
        for i, p in enumerate(self.params):
            entry = state.get(i) or state.get(str(i))
            if not entry:
                continue
            for name, target in (("exp_avg", self.exp_avg), ("exp_avg_sq", self.exp_avg_sq)):
                value = entry[name]
                if tuple(value.shape) != tuple(p.shape):
                    raise ValueError(
                        f"optimizer state {name} of parameter {i} has shape {tuple(value.shape)}, "
                        f"expected {tuple(p.shape)}"
                    )
                target[i] = value.detach().to(device=p.device, dtype=p.dtype).clone()
            steps = max(steps, int(float(entry["step"])))
        self.steps = steps
        self.param_groups[0].update({k: group[k] for k in ("lr", "eps") if k in group})
        if "betas" in group:
            self.param_groups[0]["betas"] = tuple(group["betas"])
