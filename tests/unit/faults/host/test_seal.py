"""Locust's frame format without Locust, and the seal on every fault host message."""

import importlib.util
import os
import sysconfig
from pathlib import Path

import msgpack
import pytest

from faults.host import messages as m
from faults.host.seal import MIN_SECRET, SECRET_ENV, Refused, decode, encode, read_secret, seal, unseal

SECRET = b"s" * MIN_SECRET


def locust_protocol():
    """Locust's own rpc/protocol.py, loaded alone: importing the locust package monkey-patches the process."""
    path = Path(sysconfig.get_paths()["purelib"]) / "locust" / "rpc" / "protocol.py"
    spec = importlib.util.spec_from_file_location("locust_rpc_protocol", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_frame_is_what_locust_reads_and_writes():
    Message = locust_protocol().Message  # the real thing, to hold our copy of its format to it

    frame = encode("llmchaos_lease", {"body": "{}", "mac": "00"}, "host-1")
    got = Message.unserialize(frame)
    assert (got.type, got.data, got.node_id) == ("llmchaos_lease", {"body": "{}", "mac": "00"}, "host-1")
    assert decode(Message("heartbeat", {"state": "ready"}, "w1").serialize()) == ("heartbeat", {"state": "ready"}, "w1")


def test_decode_refuses_what_is_not_a_message():
    with pytest.raises(Refused, match="not a Locust message"):
        decode(b"\xc1garbage")
    with pytest.raises(Refused, match="type and node id must be strings"):
        decode(msgpack.packb((1, {}, "x")))


def test_a_seal_binds_body_type_and_sender():
    data = seal(SECRET, "llmchaos_lease", "host-1", {"seq": 3})
    assert unseal(SECRET, "llmchaos_lease", "host-1", data) == {"seq": 3}
    for kind, sender, secret in (
        ("llmchaos_probe", "host-1", SECRET),  # another type
        ("llmchaos_lease", "host-2", SECRET),  # another host
        ("llmchaos_lease", "host-1", b"t" * MIN_SECRET),  # another secret
    ):
        with pytest.raises(Refused, match="wrong MAC"):
            unseal(secret, kind, sender, data)
    with pytest.raises(Refused, match="wrong MAC"):
        unseal(SECRET, "llmchaos_lease", "host-1", {**data, "body": data["body"].replace("3", "4")})
    for unsealed in ({"seq": 3}, "text", {"body": "{}"}, None):
        with pytest.raises(Refused, match="no seal"):
            unseal(SECRET, "llmchaos_lease", "host-1", unsealed)


def test_the_secret_comes_from_a_file_or_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(SECRET_ENV, raising=False)
    with pytest.raises(ValueError, match=f"give a secret file, or the secret in {SECRET_ENV}"):
        read_secret(None, "x")
    monkeypatch.setenv(SECRET_ENV, "short")
    with pytest.raises(ValueError, match="at least 16 bytes"):
        read_secret(None, "x")
    monkeypatch.setenv(SECRET_ENV, "e" * 20)
    assert read_secret(None, "x") == b"e" * 20
    f = tmp_path / "secret"
    f.write_text("f" * 20 + "\nignored\n")
    assert read_secret(str(f), "x") == b"f" * 20
    with pytest.raises(ValueError, match="No such file"):
        read_secret(str(tmp_path / "none"), "x")


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "directory", "one long line"])
def test_a_secret_file_is_a_regular_file_read_to_its_first_line_only(tmp_path, kind):
    path = {"/dev/zero": "/dev/zero", "fifo": str(tmp_path / "fifo"), "directory": str(tmp_path)}.get(kind)
    if kind == "fifo":
        os.mkfifo(path)  # no writer: reading it would block for ever
    if kind == "one long line":
        path = str(tmp_path / "long")
        Path(path).write_bytes(b"s" * 10**7)
    with pytest.raises(ValueError, match="not a regular file" if kind != "one long line" else "over 4096 bytes"):
        read_secret(path, "x")


def test_payloads_round_trip_and_malformed_ones_are_refused():
    lease = m.Lease("boot", "s1", 4, 12.5, [m.Desired("a#0", "a", "tbf", {"interface": "e"}, {"rate": "1mbit"}, 3.0)])
    assert m.parse(m.Lease, m.body(lease)) == lease
    ack = m.Ack("boot", "s1", 4, 1.0, 2.0, 3.0, [m.Record("a#0", "a", [[2.0, None]], None, None)])
    assert m.parse(m.Ack, m.body(ack)) == ack
    probed = m.Probed("boot", "s1", {"a": m.Verdict("no", "target")})
    assert m.parse(m.Probed, m.body(probed)) == probed
    with pytest.raises(Refused, match="malformed Lease: 'seq'"):
        m.parse(m.Lease, {k: v for k, v in m.body(lease).items() if k != "seq"})
    with pytest.raises(Refused, match="malformed Lease"):
        m.parse(m.Lease, {**m.body(lease), "windows": [{"id": "x"}]})


@pytest.mark.parametrize(
    ("field", "value"),
    [("expires_in", "soon"), ("expires_in", float("nan")), ("ends", 1), ("starts_in", None), ("target", ["e"])],
)
def test_a_window_field_of_the_wrong_type_is_refused_at_parse(field, value):
    window = {**m.body(m.Desired("a#0", "a", "tbf", {"interface": "e"}, {"rate": "1mbit"}, 3.0)), field: value}
    with pytest.raises(Refused, match=f"malformed Lease: {field} is "):
        m.parse(m.Lease, {"to": "b", "session": "s", "seq": 1, "sent": 1.0, "windows": [window]})


@pytest.mark.parametrize(("field", "value"), [("seq", True), ("seq", 1.5), ("sent", "now"), ("settled", [1])])
def test_a_lease_field_of_the_wrong_type_is_refused_at_parse(field, value):
    lease = {"to": "b", "session": "s", "seq": 1, "sent": 1.0, "windows": [], field: value}
    with pytest.raises(Refused, match=f"malformed Lease: {field} is "):
        m.parse(m.Lease, lease)
