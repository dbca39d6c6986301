"""What `tandem up` prints while a run goes: a live table on a terminal, else a line (or JSON) every few seconds."""

from __future__ import annotations

import json
import sys

import click

from tandem.client.screen import fixed, progress_lines

PLAIN_INTERVAL_S = 5.0


def rate_text(per_s: float) -> str:
    """A rate with the digits it needs: 1234, 5.3, 0.13 (a slow learner must not read as 0/s)."""
    if per_s >= 10 or per_s == 0:
        return f"{per_s:.0f}"
    return f"{per_s:.1f}" if per_s >= 1 else f"{per_s:.2f}"


def format_line(fig: dict) -> str:
    """One progress line for a terminal or a log."""

    def num(value, fmt=None):
        if value is None:
            return "-"
        return fixed(value) if fmt is None else fmt.format(value)

    return (
        f"{fig['elapsed_s']:6.1f}s  steps {fig['env_steps']} ({fig['env_steps_per_s']:.0f}/s)  "
        f"updates {fig['updates']} ({rate_text(fig['updates_per_s'])}/s)  episodes {fig['episodes']}  "
        f"return100 {num(fig['mean_return_100'])}  eval {num(fig['eval_return'])}  "
        f"version {num(fig['version'], '{}')}  lag {fig['lag_mean']:.1f}  dropped {fig['batches_dropped']}"
        + (f" (learner {fig['learner_dropped']})" if "learner_dropped" in fig else "")
        + (f"  pace {fig['pace_per_s']}/s waited {fig['paced_s']:.1f}s" if fig.get("pace_per_s") else "")
        + (f"  pace {fig['pace_credit']}/version waited {fig['paced_s']:.1f}s" if fig.get("pace_credit") else "")
        + (
            f"  games {fig['games']} ({fig['serve_requests_per_s']:.0f} req/s, batch {num(fig['serve_batch_mean'])}, "
            f"p99 {fig['serve_latency_p99_ms']:.1f} ms)"
            if "games" in fig
            else ""
        )
        + "".join(
            f"  | {p} v{num(f['version'], '{}')} eval {num(f['eval_return'])}"
            for p, f in fig.get("policies", {}).items()
        )
        + (
            "  | agents " + " ".join(f"{a} {fixed(r)}" for a, r in fig["agent_returns_100"].items())
            if fig.get("agent_returns_100")
            else ""
        )
    )


class Display:
    """A live table on a terminal; a plain line every few seconds otherwise (CI, pipes, log files)."""

    def __init__(self, quiet: bool, as_json: bool):
        self.quiet, self.as_json = quiet, as_json
        self.tty = sys.stdout.isatty() and not as_json
        self.next_plain = 0.0
        self.stop = None  # the run's [stop] section, for progress bars; set once the config is loaded
        self.live = None  # started with the first figures: a config refused before then leaves a clean screen

    def show(self, figures: dict, now: float, force: bool = False) -> None:
        if self.quiet:
            return
        if self.tty:
            from rich.live import Live
            from rich.text import Text

            if self.live is None:
                self.live = Live(auto_refresh=False, transient=False)
                self.live.start()

            # Lines under 80 columns with short numbers, never a table whose cells get cut mid-number.
            self.live.update(Text("\n".join(progress_lines(figures, self.stop)), no_wrap=True), refresh=True)
        elif force or now >= self.next_plain:
            self.next_plain = now + PLAIN_INTERVAL_S
            click.echo(json.dumps(figures) if self.as_json else format_line(figures))

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
