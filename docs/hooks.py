"""MkDocs hooks: the repository's own Markdown outside docs/ (README, PROTOCOL.md, deploy notes) as site pages.

They stay where they are in the repository and are shown in the site as they are, with their relative links
rewritten for their place in the site. (The configuration reference is a committed page, docs/reference/
configuration.md, written from the schema by `python -m tandem.daemons.config.reference`; a test keeps it current.)
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parent.parent

# A page of the site -> the repository file it shows.
INCLUDED = {
    "index.md": "README.md",
    "reference/protocol.md": "protocol/PROTOCOL.md",
    "guides/deploy.md": "deploy/README.md",
}
LINK = re.compile(r"(?P<bang>!?)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)(?P<title>\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def on_files(files: Files, config) -> Files:
    """Add the generated pages to the site."""
    for page, source in INCLUDED.items():
        files.append(File.generated(config, page, content=(REPO / source).read_text(encoding="utf-8")))
    return files


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    """Point links that leave docs/ at their page in the site, or at the repository."""
    page_uri = page.file.src_uri
    origin = INCLUDED.get(page_uri, f"docs/{page_uri}")
    out, in_fence = [], False
    for line in markdown.split("\n"):
        if FENCE.match(line):
            in_fence = not in_fence
        if not in_fence:
            line = LINK.sub(lambda m: _rewrite(m, page_uri, origin, config), line)
        out.append(line)
    return "\n".join(out)


def _rewrite(match: re.Match, page_uri: str, origin: str, config) -> str:
    target = match["target"]
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
        return match[0]  # an address, an anchor on this page, or an absolute path: not ours
    path, _, anchor = target.partition("#")
    repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(origin), path))
    site_path = None
    if repo_path.startswith("docs/"):
        site_path = repo_path[len("docs/") :]
    elif repo_path in INCLUDED.values():
        site_path = next(page for page, source in INCLUDED.items() if source == repo_path)
    if site_path is not None:
        new = posixpath.relpath(site_path, posixpath.dirname(page_uri) or ".") + (f"#{anchor}" if anchor else "")
        return f"{match['bang']}[{match['text']}]({new}{match['title'] or ''})"
    if not (REPO / repo_path).exists():
        return match[0]  # a broken link stays, so that a strict build reports it
    repo_url = (config.get("repo_url") or "").rstrip("/")
    if repo_url:
        kind = "tree" if (REPO / repo_path).is_dir() else "blob"
        return f"{match['bang']}[{match['text']}]({repo_url}/{kind}/main/{repo_path})"
    return match["text"]  # a file of the repository with no page in the site: its name, as written
