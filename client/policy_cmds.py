"""`tandem eval` and `tandem export`: a trained policy played on its env, or written out pickle-free."""

from __future__ import annotations

import json
import sys

import click

from tandem.client.api.trained import PolicyError
from tandem.daemons.runtime.exit_codes import ExitCode

SOURCE_HELP = (
    "CHECKPOINT_OR_RUN is a run directory (runs/NAME; its newest checkpoint unless --checkpoint says), "
    "a checkpoint file or an exported directory."
)
policy_option = click.option(
    "--policy", default=None, metavar="NAME", help="Which policy of a multi-agent run (default: 'default')."
)
# choices written out, not imported: `tandem --help` stays light (api/checkpoint_choice.py refuses others too)
checkpoint_option = click.option(
    "--checkpoint",
    type=click.Choice(["latest", "best", "solved"]),
    default=None,
    help="Which checkpoint of a run directory: latest (the default: the learner's newest), best (the weights "
    "of the evaluator's highest return so far) or solved (the first to reach stop.eval_return).",
)


def fail(exc: PolicyError) -> None:
    """A person's error, no traceback, the error's own exit code."""
    click.echo(f"error: {exc}", err=True)
    sys.exit(int(exc.code))


@click.command("eval", epilog=SOURCE_HELP)
@click.argument("source", metavar="CHECKPOINT_OR_RUN")
@policy_option
@checkpoint_option
@click.option("--episodes", default=10, show_default=True, type=click.IntRange(min=1), help="Episodes to play.")
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Episode i starts from reset(seed=SEED + i).",
)
@click.option(
    "--sample", is_flag=True, help="Sample actions (on-policy) or act epsilon-greedy (DQN, 0.05) instead of greedily."
)
@click.option(
    "--render",
    type=click.Choice(["rgb_array", "human"]),
    default=None,
    help="The env's render_mode: 'human' opens a window (refused where there is no display: use --video), "
    "'rgb_array' is what --video records.",
)
@click.option(
    "--video",
    type=click.Path(file_okay=False),
    default=None,
    metavar="DIR",
    help="Write each episode as DIR/episode-NNN.mp4 (OpenCV, installed with Tandem; moviepy not needed): H.264 "
    "where this OpenCV encodes it, else MPEG-4 Part 2 (mp4v, which browsers do not play), with a note.",
)
@click.option("--device", default="cpu", show_default=True, help="Torch device to infer on.")
@click.option(
    "--against",
    default=None,
    metavar="OPPONENT",
    help="In a game of several seats, play one seat against OPPONENT in the others: another checkpoint (a run "
    "directory, checkpoint file or exported directory), 'random' or 'module:callable' (a scripted player); the "
    "return is the win rate (a draw counts half). A self-play run plays its selfplay.eval_opponent without it.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (every return and length too).")
def eval_cmd(
    source: str,
    policy: str | None,
    checkpoint: str | None,
    episodes: int,
    seed: int,
    sample: bool,
    render: str | None,
    video: str | None,
    device: str,
    against: str | None,
    as_json: bool,
) -> None:
    """Play a trained policy greedily on its run's env; mean and std of the return."""
    from tandem.client.api.evaluate import evaluate
    from tandem.daemons.runtime.torch_threads import set_torch_threads

    set_torch_threads(1)  # one observation per step gains nothing from more threads; they only contend for cores
    try:
        result = evaluate(source, policy, episodes, seed, sample, render, video, device, checkpoint, against)
    except PolicyError as exc:
        fail(exc)
        return
    if as_json:
        click.echo(json.dumps(result))
        return
    mode = "greedy" if result["greedy"] else "sampled"
    click.echo(
        f"policy {result['policy']!r} ({result['algorithm']}, version {result['version']}) from {result['checkpoint']}"
    )
    if "evaluation" in result:
        e = result["evaluation"]
        value = f"{e['return']:.2f}" if isinstance(e.get("return"), (int, float)) else "unknown"
        click.echo(
            f"kept as {e.get('kind')} by the evaluator: return {value} over {e.get('episodes')} "
            f"episodes in its round {e.get('round')}"
        )
    click.echo(f"{result['env']}: {episodes} episodes, {mode}, seeds {seed}..{seed + episodes - 1}")
    r = result["return"]
    if "games" in result:
        g = result["games"]
        click.echo(
            f"against {result['against']}: {g['wins']} wins, {g['draws']} draws, {g['losses']} losses; "
            f"win rate {r['mean']:.3f} (a draw counts half)"
        )
        return
    click.echo(f"return  {r['mean']:.2f} +- {r['std']:.2f}  (min {r['min']:.2f}, max {r['max']:.2f})")
    if "length" in result:
        n = result["length"]
        click.echo(f"length  {n['mean']:.1f} +- {n['std']:.1f}  (min {n['min']:.0f}, max {n['max']:.0f})")
    for agent, a in result.get("agents", {}).items():
        click.echo(f"  {agent}: return {a['mean']:.2f} +- {a['std']:.2f}")
    if "video" in result:
        click.echo(f"videos in {result['video']}")


@click.command("export", epilog=SOURCE_HELP)
@click.argument("source", metavar="CHECKPOINT_OR_RUN")
@click.argument("out_dir", type=click.Path(file_okay=False))
@policy_option
@checkpoint_option
@click.option(
    "--format",
    "form",
    type=click.Choice(["safetensors", "onnx"]),
    default="safetensors",
    show_default=True,
    help="onnx: also policy.onnx, the network as one ONNX file a game runs without Python (pip install "
    "'tandem[onnx]').",
)
def export_cmd(source: str, out_dir: str, policy: str | None, checkpoint: str | None, form: str) -> None:
    """Write a trained policy as safetensors weights and a JSON spec (no pickle), or as ONNX beside them."""
    from tandem.client.api.export import export_policy
    from tandem.client.api.policy import load_policy

    try:
        trained = load_policy(source, policy, checkpoint=checkpoint)
        if form == "onnx":
            onnx_file = export_onnx_or_fail(trained, out_dir)
            click.echo(
                f"exported policy {trained.name!r} ({trained.algorithm}, version {trained.version}) to {onnx_file} "
                "(inputs, outputs and the policy's spec in its metadata; docs/guides/trained-policy.md)"
            )
            return
        spec_file = export_policy(trained, out_dir)
    except PolicyError as exc:
        fail(exc)
        return
    click.echo(
        f"exported policy {trained.name!r} ({trained.algorithm}, version {trained.version}) to {out_dir}: "
        f"{spec_file.name} and weights.safetensors; load with `from tandem import load_exported` and "
        f"load_exported({out_dir!r})"
    )


def export_onnx_or_fail(trained, out_dir: str):
    """policy.onnx, or a PolicyError saying what to install when ONNX is not."""
    try:
        import onnx  # noqa: F401 - the exporter's own dependency, named here before any work

        from tandem.client.api.onnx_export import export_onnx
    except ImportError as exc:
        raise PolicyError(
            f"ONNX export needs the onnx extra: pip install 'tandem[onnx]' ({exc})", ExitCode.USAGE
        ) from exc
    return export_onnx(trained, out_dir)
