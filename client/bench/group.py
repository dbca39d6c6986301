"""The `tandem bench` command group; each benchmark's module is imported only when it runs."""

import click

from tandem.client.lazy import LazyGroup

# Benchmarks that `tandem bench all` runs, in order: name -> (command, one-line help).
BENCHMARKS = {
    "atari": (
        "tandem.client.bench.atari:atari_cmd",
        "Env frames/s, learner samples/s and updates/s, lag, drops, CPU/GPU use with...",
    ),
    "broadcast": (
        "tandem.client.bench.broadcast:broadcast_cmd",
        "Median ms from publish until every actor has the new version; target: Tandem...",
    ),
    "e2e": (
        "tandem.client.bench.e2e:e2e_cmd",
        "Median time from `tandem up` to a greedy evaluation mean >= stop.eval_return...",
    ),
    "lag": (
        "tandem.client.bench.lag:lag_cmd",
        "Mean policy lag and the share of batches the learner threw away, with 1, 2, 4...",
    ),
    "replay": (
        "tandem.client.bench.replay:replay_cmd",
        "Median microseconds per ReplayBuffer.sample(256) on full buffers; target: 1M...",
    ),
    "transport": (
        "tandem.client.bench.transport:transport_cmd",
        "Actor -> learner batches/s across processes: Tandem (decode + n-step + replay...",
    ),
    "intake": (
        "tandem.client.bench.intake:intake_cmd",
        "A learner's samples/s alone and flooded by senders (receiver thread vs...",
    ),
    "isolation": (
        "tandem.client.bench.isolation:isolation_cmd",
        "One actor's env steps/s with its learner training flat out, as a fraction of...",
    ),
    "scale": (
        "tandem.client.bench.scale:scale_cmd",
        "Total env steps/s of 1, 2, 4 and 8 real actor daemons (beside a learner that...",
    ),
    "game": (
        "tandem.client.bench.game:game_cmd",
        "Served games' frames/s and latency with the learner idle and training flat...",
    ),
    "learner": (
        "tandem.client.bench.learner_work:learner_cmd",
        "The learner's own work per sample, with a network of almost no compute: what...",
    ),
    "game-solve": (
        "tandem.client.bench.game_solve:game_solve_cmd",
        "Median time from `tandem up` to the evaluation target with games served vs...",
    ),
}
COMMANDS = {
    **BENCHMARKS,
    "serial": (
        "tandem.client.bench.serial:serial_cmd",
        "Env steps until a greedy evaluation clears the target, the learning rule...",
    ),
    "learn": (
        "tandem.client.bench.learn:learn_cmd",
        "Training and evaluation return against env frames and wall time for each...",
    ),
    "selfplay": (
        "tandem.client.bench.selfplay:selfplay_cmd",
        "An actor's env steps/s drawing opponents from 50 pooled versions vs one fixed...",
    ),
    "replicas": (
        "tandem.client.bench.replicas:replicas_cmd",
        "Updates/s and samples/s of one policy with 1, 2, ... learner replicas, and...",
    ),
    "allreduce": (
        "tandem.client.bench.allreduce:allreduce_cmd",
        "A group's gradient all-reduce alone (the Nature CNN, one fixed batch, no...",
    ),
    "entities": (
        "tandem.client.bench.entities:entities_cmd",
        "An actor's env steps/s with entity observations against the same data as a...",
    ),
    "onnx": (
        "tandem.client.bench.onnx:onnx_cmd",
        "An exported policy in ONNX Runtime against Tandem's own acting: CartPole's...",
    ),
    "vector": (
        "tandem.client.bench.vector:vector_cmd",
        "One actor's env steps/s (stepping + batched inference) with each env.vector...",
    ),
    "all": (
        "tandem.client.bench.all:all_cmd",
        "Run every benchmark; print each one's targets and whether they were met.",
    ),
}


@click.group("bench", cls=LazyGroup, lazy=COMMANDS)
def bench_group() -> None:
    """Benchmarks: figures for people, or one JSON record with --json."""
