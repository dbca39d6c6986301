"""Which checkpoint of a policy's directory to load by name: `latest`, `best` or `solved` (`--checkpoint NAME`)."""

from __future__ import annotations

from pathlib import Path

from tandem.client.api.trained import PolicyError
from tandem.daemons.evaluator.kept import CHOICES, KEPT_FILES, LATEST
from tandem.daemons.runtime.exit_codes import ExitCode

WHY_MISSING = {
    "best": "the evaluator writes best.pt after its first round (a run with eval.enabled = false has none)",
    "solved": "the evaluator writes solved.pt when a round's return first reaches stop.eval_return",
}


def check_choice(choice: str | None) -> str:
    """The choice, `latest` when none is given; PolicyError (usage) naming the valid ones otherwise."""
    if choice is None:
        return LATEST
    if choice not in CHOICES:
        raise PolicyError(f"unknown checkpoint {choice!r}: choose one of {', '.join(CHOICES)}", ExitCode.USAGE)
    return choice


def available(directory: Path) -> dict[str, str]:
    """Name -> file name of every checkpoint a policy's directory holds (`latest`: its newest ckpt-*.pt)."""
    from tandem.daemons.checkpoints.files import checkpoint_files

    found = {}
    files = checkpoint_files(directory)
    if files:
        found[LATEST] = files[-1][1].name
    found.update({name: file for name, file in KEPT_FILES.items() if (directory / file).is_file()})
    return found


def describe(found: dict[str, str]) -> str:
    return ", ".join(f"{name} ({file})" for name, file in found.items()) or "none"


def pick(directory: Path, choice: str | None) -> Path:
    """What to read for `choice` in a policy's directory: the directory itself for `latest` (its newest
    loadable ckpt-*.pt, as before), the kept file for `best` and `solved`; PolicyError listing what exists."""
    choice = check_choice(choice)
    if choice == LATEST:
        return directory
    file = directory / KEPT_FILES[choice]
    if not file.is_file():
        raise PolicyError(
            f"no {choice!r} checkpoint in {directory}: {WHY_MISSING[choice]}; checkpoints there: "
            f"{describe(available(directory))}",
            ExitCode.USAGE,
        )
    return file


def refuse_choice(choice: str | None, source: Path, what: str) -> None:
    """A named choice is for run and policy directories; a file or an export is already one checkpoint."""
    if choice is not None:
        raise PolicyError(
            f"--checkpoint {choice} picks a checkpoint of a run directory, but {source} is {what}; "
            "name the run directory (runs/NAME) instead",
            ExitCode.USAGE,
        )
