"""The package layout keeps its promises: no import cycle, nothing imports upward, light modules stay light."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("protocol", "daemons", "client")
LAYER = {"protocol": 0, "daemons": 1, "client": 2}  # a module may import its own layer and those below


def module_name(path: Path) -> str:
    """The name a module is imported by: the repository's folders are `tandem.daemons`, `tandem.protocol`, ..."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["tandem", *parts])


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def type_only(tree: ast.AST) -> set[ast.AST]:
    """The nodes under `if TYPE_CHECKING:`: imports that never run, so they make no cycle (they let a module name
    the types of a module that imports it lazily, as an algorithm's torch half names its config section)."""
    guarded = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.If)
        and "TYPE_CHECKING" in {getattr(node.test, "id", ""), getattr(node.test, "attr", "")}
    ]
    return {inner for node in guarded for stmt in node.body for inner in ast.walk(stmt)}


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """Project modules `path` imports anywhere in it (functions included: a lazy import is still an edge; an
    import under `if TYPE_CHECKING:` is not, as it never runs)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text(), str(path))
    skipped = type_only(tree)
    for node in ast.walk(tree):
        if node in skipped:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import mod` is an edge to pkg.mod; `from pkg import name` one to pkg itself
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    modules = project_modules()
    known = set(modules)
    return {name: imports_of(path, name, known) for name, path in modules.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules, or None (iterative DFS, colours white/grey/black)."""
    colour = dict.fromkeys(edges, 0)
    for start in edges:
        if colour[start]:
            continue
        stack = [(start, iter(sorted(edges[start])))]
        path = [start]
        colour[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                colour[node] = 2
                stack.pop()
                path.pop()
            elif colour.get(child) == 1:
                return path[path.index(child) :] + [child]
            elif colour.get(child) == 0:
                colour[child] = 1
                stack.append((child, iter(sorted(edges[child]))))
                path.append(child)
    return None


def test_the_checker_finds_a_cycle_and_accepts_a_tree():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle_among_the_project_modules():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_protocol_and_daemons_never_import_client():
    upward = sorted(
        f"{src} -> {dst}"
        for src, dsts in graph().items()
        for dst in dsts
        if LAYER[dst.split(".")[1]] > LAYER[src.split(".")[1]]
    )
    assert not upward, "imports from a lower layer into a higher one: " + ", ".join(upward)


# The layers inside daemons/, lowest first (docs/DESIGN.md, "Layers inside daemons/"): a subpackage (or the
# top-level module `main`) imports only from layers below its own, never beside it, so no two import each other
# and no process package (actor, learner, evaluator; the supervisor above them forks them through `main`)
# imports another. What two processes share lives in a package of its own (acting, feeds, checkpoints).
DAEMON_LAYERS = (
    ("settings",),  # the config's sections and fields, TOML writing, policy names, plug-in imports, SetupError
    ("security",),  # CurveZMQ keys and the authenticator
    ("runtime",),  # what every daemon composes: heartbeats, control channel, signals, paths, endpoints
    ("envs", "replay", "checkpoints"),  # environments; replay storage; checkpoint files
    ("feeds",),  # how an algorithm takes data: replay feed, unroll queue
    ("algorithms",),  # the algorithm seam and the built-in algorithms
    ("config",),  # loading and checking a config file against the algorithms; per-policy configs
    ("acting",),  # following a learner, stepping envs, building and sending unrolls
    ("actor", "learner", "evaluator"),  # the processes the supervisor starts
    ("main",),  # the one entry point every launcher calls
    ("supervisor",),  # starts the processes through main
    ("serial",),  # one process running the parts of all of them
)


def daemon_part(module: str) -> str | None:
    """The daemons/ subpackage (or top-level module) a module belongs to, or None outside daemons/."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "daemons" else None


def layer_violations(edges: dict[str, set[str]]) -> list[str]:
    rank = {name: i for i, names in enumerate(DAEMON_LAYERS) for name in names}
    found = []
    for src, dsts in edges.items():
        for dst in dsts:
            a, b = daemon_part(src), daemon_part(dst)
            if a is None or b is None or a == b:
                continue
            if a not in rank or b not in rank:
                found.append(f"{src} -> {dst}: {a if a not in rank else b} has no layer in DAEMON_LAYERS")
            elif rank[b] >= rank[a]:
                found.append(f"{src} -> {dst}: {a} may not import {b} ({'beside' if rank[b] == rank[a] else 'above'})")
    return sorted(found)


def test_the_layer_check_finds_sideways_and_upward_imports():
    edges = {
        "tandem.daemons.actor.daemon": {"tandem.daemons.learner.checkpoint", "tandem.daemons.acting.link"},
        "tandem.daemons.settings.schema": {"tandem.daemons.algorithms.registry"},
        "tandem.daemons.newpart.x": {"tandem.daemons.settings.schema"},
    }
    found = layer_violations(edges)
    assert len(found) == 3 and "actor may not import learner (beside)" in found[0]
    assert "newpart has no layer" in found[1] and "settings may not import algorithms (above)" in found[2]


def test_daemons_subpackages_import_only_the_layers_below_them():
    on_disk = {p.name for p in (ROOT / "daemons").iterdir() if (p / "__init__.py").exists()} | {"main"}
    layered = {name for names in DAEMON_LAYERS for name in names}
    assert on_disk == layered, (
        f"packages without a layer: {on_disk - layered}; layers without a package: {layered - on_disk}"
    )
    found = layer_violations(graph())
    assert not found, "imports against the layer order of daemons/:\n" + "\n".join(found)


def test_the_graph_sees_the_imports():
    edges = graph()
    assert "tandem.protocol.framing" in edges["tandem.protocol"], "imports under tandem.* are not being followed"
    # the spec builds the torch half lazily (an edge); the torch half names the spec's types only (none)
    assert "tandem.daemons.algorithms.dqn.learner" in edges["tandem.daemons.algorithms.dqn.spec"]
    assert "tandem.daemons.algorithms.dqn.spec" not in edges["tandem.daemons.algorithms.dqn.learner"]


# Each built-in algorithm's name is written in its own module only: everything else asks its AlgorithmSpec.
ALGORITHM_MODULES = {
    "double_dqn": "daemons/algorithms/dqn/spec.py",
    "appo": "daemons/algorithms/appo/spec.py",
    "impala": "daemons/algorithms/appo/spec.py",
}
# The name as a word, not a module's path (tandem.daemons.algorithms.appo.spec, appo.py) nor part of a file name.
ALGORITHM_NAME = re.compile(r"(?<![\w.])(" + "|".join(ALGORITHM_MODULES) + r")(?!\w|\.py\b)")
# A line that picks an algorithm for a run (a benchmark's config) is a config, as examples/ are.
PICKS_ONE = re.compile(r"algorithm\.name\s*=")


def names_outside_their_modules(files: list[Path]) -> list[str]:
    found = []
    for path in files:
        where = path.relative_to(ROOT).as_posix()
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if PICKS_ONE.search(line):
                continue
            found += [
                f"{where}:{lineno} {m[1]}" for m in ALGORITHM_NAME.finditer(line) if ALGORITHM_MODULES[m[1]] != where
            ]
    return found


def test_the_name_check_finds_a_name_and_passes_module_paths():
    assert ALGORITHM_NAME.findall("if name == 'appo': ...  # (appo, impala) double_dqn.") == [
        "appo",
        "appo",
        "impala",
        "double_dqn",
    ]
    assert not ALGORITHM_NAME.findall("tandem.daemons.algorithms.appo.spec:APPO appo.py pong_appo.toml APPOSection")


def test_no_algorithm_name_is_written_outside_its_own_module():
    files = [p for top in (*PACKAGES, "tandem") for p in (ROOT / top).rglob("*.py")]  # not docs, examples, tests
    found = names_outside_their_modules(files)
    assert not found, "algorithm names outside their modules (ask the AlgorithmSpec instead): " + ", ".join(found)


def python_files() -> list[Path]:
    return [p for top in (*PACKAGES, "tandem", "tests", "examples", "deploy") for p in (ROOT / top).rglob("*.py")]


def test_every_import_goes_through_the_tandem_name():
    # In a checkout `daemons` and `tandem.daemons` both import, as two copies of every module (two RunConfig
    # classes, two of every counter); installed, only `tandem` exists. So nothing may use the bare names.
    bare = []
    for path in python_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            bare += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n.split(".")[0] in PACKAGES]
    assert not bare, "imports of the bare package names (use tandem.<name>): " + ", ".join(bare)


def test_an_installed_tandem_adds_only_the_tandem_name(tmp_path):
    """`pip install .` into a clean environment: `import tandem` works, `import client/daemons/protocol` fail."""
    # from a copy: setuptools builds in the source tree (build/, *.egg-info), which must stay clean
    source, target = tmp_path / "source", tmp_path / "site"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "build", "runs", "site", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis"
        ),
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "--target",
            str(target),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    installed = sorted(p.name for p in target.iterdir() if not p.name.endswith((".dist-info", ".egg-info")))
    assert installed == ["bin", "tandem"] or installed == ["tandem"], installed
    # what `tandem bench` runs by default ships with it
    assert (target / "tandem" / "examples" / "cartpole_appo.toml").is_file()
    assert (target / "tandem" / "protocol" / "PROTOCOL.md").is_file()
    probe = (
        "import importlib, sys\nsys.path.insert(0, sys.argv[1])\nimport tandem, tandem.protocol.limits\n"
        "print(tandem.__file__.startswith(sys.argv[1]))\nfor name in ('client', 'daemons', 'protocol'):\n"
        "    try:\n        importlib.import_module(name)\n        print(name)\n    except ImportError:\n"
        "        pass\n"
    )
    found = subprocess.run(
        [sys.executable, "-I", "-c", probe, str(target)], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.split() == ["True"], found.stdout


def loaded_after(code: str) -> set[str]:
    """Top-level module names loaded after running `code` in a fresh interpreter."""
    probe = code + "\nimport sys\nprint(' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


@pytest.mark.parametrize(
    "module",
    [
        "tandem.daemons.replay",
        "tandem.daemons.config",
        "tandem.daemons.supervisor.progress",
        "tandem.daemons.runtime.control_channel",
        "tandem.daemons.algorithms",
    ],
)
def test_light_modules_import_no_torch(module):
    assert "torch" not in loaded_after(f"import {module}")


# Every daemon composes a DaemonRuntime (daemons/runtime/daemon_runtime.py) for what all of them set up and tear
# down the same way; none builds its own context, control channel or reporter, nor waits for a token by hand.
DAEMON_CLASSES = {
    "daemons/actor/daemon.py": "Actor",
    "daemons/actor/serve/server.py": "GameServer",
    "daemons/learner/daemon.py": "Learner",
    "daemons/evaluator/daemon.py": "Evaluator",
}
DAEMON_PACKAGES = ("daemons/actor", "daemons/learner", "daemons/evaluator")
RUNTIME_OWNS = {"new_context", "close_context", "ControlChannel", "Reporter", "wait_start_token"}


def called_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every call by name, `f(...)` or `module.f(...)`, but not a runtime's own `runtime.f(...)`."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name):
            found.append((node.lineno, func.id))
        elif isinstance(func, ast.Attribute) and not ast.unparse(func.value).endswith("runtime"):
            found.append((node.lineno, func.attr))
    return found


def built_by_hand(source: str, where: str) -> list[str]:
    return [f"{where}:{line} {name}" for line, name in called_names(ast.parse(source)) if name in RUNTIME_OWNS]


def test_the_runtime_check_finds_a_hand_built_context_and_passes_the_runtime():
    hand_built = (
        "ctx = sockets.new_context()\nch = ControlChannel(ctx, e)\nr = Reporter('actor', n, 1.0, ch)\n"
        "wait_start_token(ch, n, r, stopped)\n"
    )
    assert built_by_hand(hand_built, "x.py") == [
        "x.py:1 new_context",
        "x.py:2 ControlChannel",
        "x.py:3 Reporter",
        "x.py:4 wait_start_token",
    ]
    composed = "self.runtime = DaemonRuntime('actor', n, config, e, stop)\nself.runtime.wait_start_token()\n"
    assert not built_by_hand(composed, "x.py")


def test_no_daemon_builds_its_own_context_channel_or_reporter():
    found = []
    for package in DAEMON_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found += built_by_hand(path.read_text(), path.relative_to(ROOT).as_posix())
    assert not found, "daemons build what DaemonRuntime owns (use its ctx, channel, reporter): " + ", ".join(found)


def daemon_class(path: Path, name: str) -> ast.ClassDef:
    classes = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef) and n.name == name]
    assert classes, f"{path.relative_to(ROOT)} has no class {name} (update DAEMON_CLASSES)"
    return classes[0]


# what the env actor and the action server both are: a runtime and links to the learners (daemons/actor/process.py)
RUNTIME_HOLDERS = {"daemons/actor/process.py": "ActorProcess"}


def test_every_daemon_composes_a_runtime():
    def makes_runtime(where: str, name: str, holders: set[str]) -> bool:
        """It makes a DaemonRuntime itself, or is one of the holders that does."""
        cls = daemon_class(ROOT / where, name)
        bases = {ast.unparse(b).rpartition(".")[2] for b in cls.bases}
        return "DaemonRuntime" in {n for _, n in called_names(cls)} or bool(bases & holders)

    holders = {name for where, name in RUNTIME_HOLDERS.items() if makes_runtime(where, name, set())}
    assert holders == set(RUNTIME_HOLDERS.values()), "a runtime holder that makes no DaemonRuntime"
    without = [name for where, name in DAEMON_CLASSES.items() if not makes_runtime(where, name, holders)]
    assert not without, "daemons that make no DaemonRuntime: " + ", ".join(without)


def test_daemons_are_composed_not_inherited():
    """The action server holds the parts it shares with the actor (links, pacing, reports) instead of
    subclassing it and rewriting its loop; no daemon is another's subclass."""
    names = set(DAEMON_CLASSES.values())
    inherited = [
        f"{path.relative_to(ROOT)}: {node.name}({base})"
        for path in (ROOT / "daemons").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
        for base in (ast.unparse(b) for b in node.bases)
        if base.rpartition(".")[2] in names
    ]
    assert not inherited, "daemon classes inherited from: " + ", ".join(inherited)


MODULE_MAX_LINES = 400  # one job a module; past this a module is doing two (docs/DESIGN.md, "How the code should feel")


def test_no_module_is_over_the_line_limit():
    files = [p for top in (*PACKAGES, "tandem") for p in (ROOT / top).rglob("*.py")]
    long = sorted(
        f"{p.relative_to(ROOT)}: {n} lines" for p in files if (n := len(p.read_text().splitlines())) > MODULE_MAX_LINES
    )
    assert not long, f"modules over {MODULE_MAX_LINES} lines (split them by job): " + ", ".join(long)


def test_the_example_plugin_needs_only_the_public_algorithm_surface():
    # What an algorithm author writes imports Tandem through tandem.algorithms alone (docs/guides/extending.md).
    import tandem.algorithms as surface

    tree = ast.parse((ROOT / "examples" / "reinforce_baseline.py").read_text())
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tandem")
    }
    assert imported == {"tandem.algorithms"}, (
        f"the example plug-in reaches into {sorted(imported - {'tandem.algorithms'})}"
    )
    for name in surface.__all__:  # every name the surface offers resolves
        assert getattr(surface, name) is not None, name
    assert "torch" not in loaded_after(
        "import tandem.algorithms; tandem.algorithms.AlgorithmSpec; tandem.algorithms.option"
    )
