"""The floor plan, held against the code: which component may import which (DESIGN's Layout).

Every import statement of every module is read from its AST, function-level (lazy) imports
included, so a new arrow that runs the wrong way fails here. What a command really loads when it runs:
tests/integration/test_lazy_imports.py (a fresh interpreter each).
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("llmchaos", "reference_server", "loadtests", "faults", "dashboards", "compose", "benchmarks", "tests")
# What each component may import besides itself and third-party packages (a package, or one of its
# subpackages).
ALLOWED = {
    "llmchaos": set(),  # the core knows no component
    "reference_server": {"llmchaos"},  # the system under test knows no harness and no injector
    "faults": {"llmchaos"},  # injectors do not know Locust
    "dashboards": {"llmchaos"},  # the readers of results go through the core's run model
    "loadtests": {"llmchaos", "faults"},  # faults for --schedule
    "compose": {"llmchaos"},  # the stack, the demo and the nightly gate start the components by their commands
    "benchmarks": {"llmchaos", "tests.servers"},  # components by their commands; the ground-truth servers
}


def _allowed(name: str, allowed: set[str]) -> bool:
    return any(name == a or name.startswith(a + ".") for a in allowed)


def every_import(path: Path) -> set[str]:
    """Every module (dotted name) the module imports, anywhere in its body, third-party ones too."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def imported_modules(path: Path) -> set[str]:
    """This project's modules (dotted names) that the module imports, anywhere in its body."""
    return {name for name in every_import(path) if name.split(".")[0] in PACKAGES}


def imported_packages(path: Path) -> set[str]:
    """Top-level packages of this project that the module imports, anywhere in its body."""
    return {name.split(".")[0] for name in imported_modules(path)}


def violations(root: Path) -> list[str]:
    out = []
    for package, allowed in ALLOWED.items():
        for path in sorted((root / package).rglob("*.py")):
            for imported in sorted(imported_modules(path)):
                top = imported.split(".")[0]
                if top != package and not _allowed(imported, allowed):
                    out.append(f"{path.relative_to(root)} imports {top}")
    return out


def test_every_component_imports_only_what_the_layout_allows():
    assert violations(ROOT) == []


def test_the_check_sees_lazy_and_from_imports(tmp_path):
    (tmp_path / "llmchaos").mkdir()
    (tmp_path / "llmchaos" / "cli.py").write_text("def run():\n    from faults.cli import register\n")
    (tmp_path / "faults").mkdir()
    (tmp_path / "faults" / "x.py").write_text("import loadtests.plugin\nimport llmchaos\n")
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "b.py").write_text(
        "from tests.procs import free_port\nfrom tests.servers import truth\n"
    )
    assert violations(tmp_path) == [
        "llmchaos/cli.py imports faults",
        "faults/x.py imports loadtests",
        "benchmarks/b.py imports tests",
    ]


def test_nothing_but_locustfiles_and_tests_imports_loadtests():
    importers = {
        p.relative_to(ROOT).parts[0]
        for pkg in ALLOWED
        for p in (ROOT / pkg).rglob("*.py")
        if "loadtests" in imported_packages(p)
    }
    assert importers <= {"loadtests"}


def test_only_the_load_tests_import_locust():
    """Importing Locust monkey-patches the process: the core, the server, the readers and every fault
    (the fault host's end of the protocol included: it speaks Locust's wire without it) stay out."""
    importers = {
        str(p.relative_to(ROOT))
        for pkg in ALLOWED
        for p in (ROOT / pkg).rglob("*.py")
        if any(name.split(".")[0] == "locust" for name in every_import(p))
    }
    assert importers
    assert {path.split("/")[0] for path in importers} == {"loadtests"}, sorted(importers)


def test_the_harness_reaches_the_faults_through_their_timeline_only():
    """The harness holds one `Timeline` (faults/timeline.py) that faults/session.py opens: no fault
    type, no fault host, no cluster reader of its own."""
    harness = ROOT / "loadtests" / "harness.py"
    assert {name for name in imported_modules(harness) if name.split(".")[0] == "faults"} == {
        "faults.session",
        "faults.timeline",
    }
    tree = ast.parse(harness.read_text(encoding="utf-8"))
    checked = [
        ast.unparse(call.args[0])
        for call in ast.walk(tree)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "isinstance"
    ]
    assert sorted(checked) == ["runner", "runner", "self.env.runner", "self.env.runner"]  # its role, not a fault type


def test_nothing_in_the_fault_hosts_imports_locust():
    assert [
        str(p.relative_to(ROOT))
        for p in (ROOT / "faults" / "host").rglob("*.py")
        if any(name.split(".")[0] == "locust" for name in every_import(p))
    ] == []
