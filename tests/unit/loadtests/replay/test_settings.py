import dataclasses

import configargparse
import msgpack
import pytest

from llmchaos.errors import UsageError
from loadtests.replay.dispatch import ReplayPlan
from loadtests.replay.settings import Carried, ReplaySettings, add_replay_arguments, concurrency


def options(*argv: str):
    """The options as Locust's parser reads them, its own --host and -u among them."""
    parser = configargparse.ArgumentParser()
    parser.add_argument("--host", default="")
    add_replay_arguments(parser)
    return parser.parse_args(["--log", "x.jsonl", *argv])


def test_one_target_two_split_or_mirrored():
    single = ReplaySettings.read(options("--host", "http://a:1/"))
    assert (single.mode, single.targets) == ("single", {"a": "http://a:1"})
    split = ReplaySettings.read(options("--target-a", "http://a", "--target-b", "http://b", "--split", "25"))
    assert (split.mode, split.split, split.sides) == ("split", 25.0, ("a", "b"))
    mirror = ReplaySettings.read(options("--target-a", "http://a", "--target-b", "http://b", "--mirror"))
    assert mirror.mode == "mirror"
    assert concurrency(options()) == 100
    s = ReplaySettings.read(options("--host", "h", "--start", "1m", "--end", "90s", "--lang-mix", "en=1"))
    assert (s.start, s.end, s.mix.tags) == (60.0, 90.0, ("en",))


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        ((), "--target-a: give version A's base URL"),
        (("--host", "h", "--target-b", "h"), "--target-b: B must be another URL"),
        (("--host", "h", "--target-b", "g"), "--split: with two targets, give --split N"),
        (("--host", "h", "--split", "10"), "--split: needs --target-b"),
        (("--host", "h", "--target-b", "g", "--split", "101"), "--split: must be a finite number from 0 to 100"),
        (("--host", "h", "--target-b", "g", "--split", "5", "--mirror"), "--mirror: give --split or --mirror"),
        (("--host", "h", "--target-b", "g", "--split", "5", "--energy-from", "http://p"), "--energy-from: reads one"),
        (("--host", "h", "--speed", "0"), "--speed: must be a finite number > 0"),
        (("--host", "h", "--sample", "0"), "--sample: must be a finite number above 0 up to 1"),
        (("--host", "h", "--loop", "0"), "--loop: must be a finite number >= 1"),
        (("--host", "h", "--max-concurrency", "0"), "--max-concurrency: must be a finite number >= 1"),
        (("--host", "h", "--start", "2m", "--end", "1m"), "--end: must be after --start"),
        (("--host", "h", "--rate", "5"), "--rate: not used by a replay"),
        (("--host", "h", "--shape", "step"), "--shape: not used by a replay"),
        (("--host", "h", "--canary-rate", "0.1"), "--canary-rate: not used by a replay"),
        (("--host", "h", "--columns", "when=t"), "--columns: unknown field 'when'"),
        (("--host", "h", "--lang-mix", "xx=1"), "--lang-mix: unknown language 'xx'"),
    ],
)
def test_bad_options_name_the_flag(argv, error):
    with pytest.raises(UsageError) as e:
        ReplaySettings.read(options(*argv))
    assert str(e.value).startswith(error)


def test_the_log_is_required():
    parser = configargparse.ArgumentParser()
    parser.add_argument("--host", default="h")
    add_replay_arguments(parser)
    with pytest.raises(UsageError, match="--log: give the log"):
        ReplaySettings.read(parser.parse_args([]))


def test_the_plan_carries_the_options_typed_and_a_worker_reads_the_same_settings(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text('{"ts": 1, "user_id": "u", "input_tokens": 3}\n')
    argv = ("--log", str(log), "--target-a", "http://a", "--target-b", "http://b", "--mirror", "--speed", "2")
    master = ReplaySettings.read(options(*argv, "--model", "m", "--force-output-length", "--lang-mix", "en=1"))
    plan = ReplayPlan(10.0, 1, 2, master.options)
    worker = ReplayPlan.from_message(msgpack.unpackb(msgpack.packb(plan.message())))  # as Locust sends it
    assert worker == plan
    assert isinstance(worker.options, Carried)
    read = ReplaySettings.read(worker.options)
    assert dataclasses.replace(read, mix=master.mix) == master  # a LangMix has no equality: its source does
    assert worker.options.lang_mix == "en=1"
