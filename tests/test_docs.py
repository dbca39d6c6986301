"""The documentation: the README stays a short front door whose links work, and the MkDocs site builds strictly."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_MAX_LINES = 300
# Pages docs/hooks.py generates at build time: none of them may be committed under docs/.
GENERATED = ("index.md", "reference/protocol.md", "guides/deploy.md")
# Where the repository's Markdown lives (the README says the pages read as Markdown too, so every link must work
# there, not only in the built site); what is built or installed is not ours to check.
NOT_OURS = {".venv", "site", "build", "dist", ".git", ".pytest_cache", ".hypothesis", "runs", "node_modules"}

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_links(text: str) -> list[str]:
    """Inline link and image targets outside fenced code blocks."""
    links, in_fence = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            links += LINK.findall(re.sub(r"`[^`]*`", "", line))
    return links


def heading_anchors(text: str) -> set[str]:
    """The anchors MkDocs (Python-Markdown's toc) and GitHub give the headings of a page, for plain headings."""
    anchors, in_fence = set(), False
    for line in text.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (match := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)):
            title = re.sub(r"[^\w\s-]", "", match[1]).strip().lower()
            anchors.add(re.sub(r"[-\s]+", "-", title))
    return anchors


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def broken_links(page: Path) -> list[str]:
    """The relative links of a Markdown file whose file, or heading anchor, does not exist beside it."""
    broken = []
    for target in markdown_links(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # an address: not checked here (no network)
        path, _, anchor = target.partition("#")
        file = (page.parent / path) if path else page
        if not file.exists():
            broken.append(f"{page.relative_to(ROOT)}: {target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in heading_anchors(file.read_text(encoding="utf-8")):
            broken.append(f"{page.relative_to(ROOT)}: {target}: {file.name} has no heading with anchor #{anchor}")
    return broken


def repository_markdown() -> list[Path]:
    return sorted(page for page in ROOT.rglob("*.md") if not NOT_OURS.intersection(page.relative_to(ROOT).parts[:-1]))


def test_readme_links_point_to_existing_files_and_headings():
    broken = broken_links(README)
    assert not broken, "README.md has broken links:\n" + "\n".join(broken)


def test_every_markdown_link_works_read_as_markdown():
    pages = repository_markdown()
    assert README in pages and ROOT / "docs" / "guides" / "one-machine.md" in pages
    broken = [line for page in pages for line in broken_links(page)]
    assert not broken, "links that work only in the built site, or nowhere:\n" + "\n".join(broken)


def test_configuration_reference_page_matches_the_schema():
    from tandem.daemons.config.reference import config_reference_page

    committed = (ROOT / "docs" / "reference" / "configuration.md").read_text(encoding="utf-8")
    assert committed == config_reference_page(), (
        "docs/reference/configuration.md differs from the config schema: "
        "run `python -m tandem.daemons.config.reference` and commit the page"
    )


def test_generated_pages_are_not_committed():
    committed = [page for page in GENERATED if (ROOT / "docs" / page).exists()]
    assert not committed, f"generated at build time by docs/hooks.py, so they must not exist in docs/: {committed}"


@pytest.mark.timeout(600)
def test_site_builds_in_strict_mode(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
    pytest.importorskip("material", reason="the docs extra is not installed (pip install -e '.[docs]')")
    pytest.importorskip("mkdocs_click", reason="the docs extra is not installed (pip install -e '.[docs]')")
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"

    home = (site / "index.html").read_text(encoding="utf-8")
    assert "Where it stands" in home  # the README, shown as the home page

    configuration = (site / "reference/configuration/index.html").read_text(encoding="utf-8")
    for section in ("[run]", "[env.atari]", "[algorithm]", "[supervisor]", "[security]", "[policies.NAME]"):
        assert section in configuration, f"the generated configuration reference lacks {section}"

    from tandem.client.cli import COMMANDS

    cli = (site / "reference/cli/index.html").read_text(encoding="utf-8")
    missing = [name for name in COMMANDS if f'id="tandem-{name}"' not in cli]
    assert not missing, f"the CLI reference does not render these subcommands: {missing}"
    assert "Sentinel.UNSET" not in cli

    protocol = (site / "reference/protocol/index.html").read_text(encoding="utf-8")
    assert "Tandem wire protocol" in protocol
    assert (site / "guides/deploy/index.html").exists()
    assert (site / "images/processes.svg").exists() and (site / "images/cartpole-appo.png").exists()
    assert not (site / "hooks.py").exists()
