"""Hypothesis profiles for the fuzz tests: `ci` (the default, in make test) runs a fixed, repeatable
set of examples; `soak` (make fuzz) runs many fresh ones. Every test is marked with its tier by the
folder it is in (a new file lands in the right tier). No test module may import locust into the test
process. And `--stress` (make test-stressed) runs a CPU-bound process on every core for the whole
session: tests marked `timing` must pass under it.

When tests run in parallel (`make test`), the timing tests run one after another on a worker of
their own, each ahead of the other tests running meanwhile (tests/ahead.py), and one that fails
runs once more (a rerun, listed in the summary: a defect to fix)."""

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.ahead import Ahead, controller

settings.register_profile(
    "ci",
    max_examples=200,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("soak", max_examples=20_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")

TESTS = Path(__file__).parent
# tests/<folder>/... -> its tier (pyproject.toml says what each means); `make check` runs the unit tier.
TIERS = ("unit", "integration", "system", "calibration")


# The system tier's modules that boot the kernel lab (a real-time kernel that takes a CPU of its own).
KERNEL_LAB = ("test_kernel_lab", "test_netem_lab", "test_aim_lab", "test_drill_lab")


def folder(item: pytest.Item) -> str:
    return item.path.relative_to(TESTS).parts[0]


def in_lab(item: pytest.Item) -> bool:
    return folder(item) == "system" and item.path.stem in KERNEL_LAB


def parallel() -> bool:
    """Whether this process is a pytest-xdist worker (make test)."""
    return "PYTEST_XDIST_WORKER" in os.environ


def timed(item: pytest.Item) -> bool:
    """A timing test that runs ahead of the rest (the kernel lab's run their kernel at real-time priority)."""
    return item.get_closest_marker("timing") is not None and not in_lab(item)


def group(item: pytest.Item) -> str | None:
    """The test's group for `pytest -n N --dist loadgroup` (one worker runs a group's tests one after
    another): the timing tests, the kernel lab's tests, the rest of the system tier (namespaces, one
    dockerd), and each integration module, so that its module-scoped servers start once."""
    if timed(item):
        return "timing"
    if folder(item) == "system":
        return "kernel-lab" if in_lab(item) else "system"
    return item.path.stem if folder(item) == "integration" else None


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its tier (its folder), its group, `kernel_lab` where it boots the lab and,
    in parallel, one rerun for a timing test. The timing tests go first, then the kernel lab, then
    the rest of the system tier: their groups take minutes on one worker each, so they start first
    (make test keeps this order: --no-loadscope-reorder) and the short work of the rest fills the
    other workers around them."""
    for item in items:
        if folder(item) in TIERS:
            item.add_marker(folder(item))
        if name := group(item):
            item.add_marker(pytest.mark.xdist_group(name))
        if in_lab(item):
            item.add_marker("kernel_lab")
        if parallel() and timed(item):
            item.add_marker(pytest.mark.flaky(reruns=1))
    items.sort(key=lambda item: (not timed(item), not in_lab(item), folder(item) != "system"))  # stable


def pytest_collection_finish(session: pytest.Session) -> None:
    """Importing locust monkey-patches threads, sockets and sleeps with gevent's for every later test
    (a torch step in a 'thread' then blocks the event loop): tests run Locust in its own processes."""
    if "locust" in sys.modules:
        raise pytest.UsageError("a test module imported locust into the test process (through loadtests?)")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--stress",
        action="store_true",
        help="a CPU-bound process on every core while the tests run (make test-stressed)",
    )


_hogs: list[subprocess.Popen] = []
_ahead = Ahead()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """In parallel, a timing test (its reruns, its fixtures and every process it starts) runs ahead."""
    if not parallel() or not timed(item):
        return (yield)
    with _ahead.running():
        return (yield)


def pytest_sessionstart(session: pytest.Session) -> None:
    if session.config.getoption("--stress"):
        hog = [sys.executable, "-c", "while True: pass"]
        _hogs.extend(subprocess.Popen(hog) for _ in range(os.cpu_count() or 1))


def pytest_sessionfinish(session: pytest.Session) -> None:
    _ahead.remove()
    for hog in _hogs:
        hog.kill()
        hog.wait()
    _hogs.clear()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Where the timing tests ran, in parallel; why each rerun test failed the first time (its error's
    lines): the defect a rerun stands for."""
    if terminalreporter.config.getoption("numprocesses", None):
        found = controller()
        terminalreporter.write_line(
            f"timing tests: one at a time, each ahead of the rest in a cpu cgroup ({found[0]})"
            if found
            else "timing tests: one at a time, NOT ahead of the rest (no cpu cgroup controller here)"
        )
    for report in terminalreporter.stats.get("rerun", []):
        why = [line for line in report.longreprtext.splitlines() if line.startswith("E ")][:6]
        terminalreporter.write_line(f"rerun {report.nodeid}:")
        for line in why or report.longreprtext.splitlines()[-6:]:
            terminalreporter.write_line(f"  {line[:300]}")


def pytest_report_header(config: pytest.Config) -> str | None:
    return f"stressed: a CPU-bound process on each of {os.cpu_count()} cores" if config.getoption("--stress") else None


@pytest.fixture(params=["native", "python"])
def each_plane(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test on each data plane (LLMCHAOS_PLANE, read by every client made meanwhile, in this
    process and in the Locust processes it starts). `make install` builds the native one: a test
    asking for it fails where it is missing."""
    from loadtests.dataplane import native

    if request.param == "native" and not native.available():
        pytest.fail("the native plane is not built (make install builds loadtests/dataplane/_native.c)")
    monkeypatch.setenv("LLMCHAOS_PLANE", request.param)
    return str(request.param)
