from tests.inprocess import llmchaos
from tests.unit.faults.schedules import GOOD


def test_cli_rejects_a_bad_schedule_with_exit_2_and_touches_nothing(tmp_path, capsys):
    p = tmp_path / "bad.yaml"
    p.write_text(GOOD.replace("kind: sse", "kind: plague"))  # an unknown kind, as test_schedule.BAD[0]
    journal = tmp_path / "journal.json"
    r = llmchaos(capsys, "faults", "run", str(p), "--journal", str(journal))
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert "faults[0].kind" in r.stderr
    assert not journal.exists()


def test_dry_run_prints_the_plan(tmp_path, capsys):
    p = tmp_path / "s.yaml"
    p.write_text(GOOD)
    r = llmchaos(capsys, "faults", "run", str(p), "--dry-run", "--duration", "10")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("seed 7; 3 windows")
    assert "slow-gpu" in lines[1]
    assert "drop" in lines[2]


def test_a_bad_direction_is_one_line_naming_it_with_exit_2(tmp_path, capsys):
    p = tmp_path / "bad.yaml"
    p.write_text(
        "faults:\n  - {name: jitter, kind: netem, target: {interface: veth0}, at: 0s, duration: 1s,\n"
        "     params: {delay: 100ms}, direction: upstream}\n"
    )
    journal = tmp_path / "journal.json"
    for command in (["run", str(p), "--journal", str(journal)], ["run", str(p), "--dry-run"], ["probe", str(p)]):
        r = llmchaos(capsys, "faults", *command)
        assert r.returncode == 2, (command, r.stdout, r.stderr)
        assert r.stderr.strip() == (
            f"llmchaos: error: {p}:3: faults[0].direction: expected one of egress, ingress, both, got 'upstream'"
        )
    assert not journal.exists()


def test_dry_run_shows_the_direction_and_the_match(tmp_path, capsys):
    p = tmp_path / "s.yaml"
    p.write_text(
        "faults:\n  - {name: jitter, kind: netem, target: {netns: lt, interface: veth0}, at: 0s, duration: 1s,\n"
        "     params: {delay: 100ms, jitter: 30ms, distribution: uniform}, direction: ingress,\n"
        "     match: {dst: 10.0.0.0/24, dport: 8000}}\n"
    )
    r = llmchaos(capsys, "faults", "run", str(p), "--dry-run")
    assert r.returncode == 0, r.stderr
    assert (
        r.stdout.strip()
        .splitlines()[1]
        .endswith(
            '{"delay": "100ms", "jitter": "30ms", "distribution": "uniform", "direction": "ingress", '
            '"match": {"dst": "10.0.0.0/24", "dport": 8000}}'
        )
    )
