from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Iterator

import docker
import pytest

from tests.system import kernel_lab
from tests.system.dockerd import build_image, dockerd


@pytest.fixture(scope="session")
def daemon() -> Iterator[tuple[docker.DockerClient, str]]:
    """A dockerd of the session's own, and the busybox image built on it."""
    with dockerd() as client:
        yield client, build_image(client)


@pytest.fixture(scope="module")
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], dict]:
    """What lab_probe measured for each of the module's CASES (name: spec) that its selected tests name
    in their `case` parameter: all of them in one boot of the kernel lab per set of `modules` a spec
    asks for (default: all of NET_MODULES), since a boot and the guest's imports cost more than most
    cases' probes. Skipped, with the reason, where the lab cannot boot."""
    reason = kernel_lab.unavailable()
    if reason:
        pytest.skip(reason)
    cases: dict[str, dict] = request.module.CASES
    wanted = {case for item in request.session.items if item.path == request.path and (case := _case(item))}
    boots: dict[tuple[str, ...], dict[str, dict]] = {}
    if unknown := wanted - cases.keys():
        pytest.fail(f"{request.path.name}: cases its tests name but CASES lacks: {sorted(unknown)}")
    for name in sorted(wanted):
        spec = dict(cases[name])
        boots.setdefault(tuple(spec.pop("modules", kernel_lab.NET_MODULES)), {})[name] = spec
    results: dict[str, dict | str] = {}
    for modules, specs in boots.items():
        work = tmp_path_factory.mktemp("lab")
        (work / "cases.json").write_text(json.dumps(specs))
        command = f"{shlex.quote(sys.executable)} -m tests.system.lab_probe {work}/cases.json {work}/out.json"
        run = kernel_lab.run(command, work, timeout=60 + 60 * len(specs), modules=modules)
        if run.returncode == 0:
            results.update(json.loads((work / "out.json").read_text()))
        else:
            results.update(dict.fromkeys(specs, run.failure()))

    def measured(case: str) -> dict:
        out = results[case]
        if isinstance(out, str):
            pytest.fail(f"the lab's boot for {case!r} failed: {out}")
        if "error" in out:
            pytest.fail(f"lab_probe failed on {case!r}:\n{out['error']}")
        return out

    return measured


def _case(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("case") if callspec else None
