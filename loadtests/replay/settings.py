"""The replay's options on Locust's command line (besides the load test's own), and what they mean,
checked once: `ReplaySettings`."""

from __future__ import annotations

import math
from argparse import Namespace
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from llmchaos.errors import UsageError
from llmchaos.units import duration
from loadtests.logs import column_map
from loadtests.logs.formats import NAMES, LogSource, source
from loadtests.logs.lines import MAX_LINE_BYTES
from loadtests.logs.split import LangMix
from loadtests.options import add_arguments, check_number

if TYPE_CHECKING:
    from configargparse import ArgumentParser

DEFAULT_CONCURRENCY = 100
# The load test's options a replay has no use for: its schedule is the log's.
NOT_IN_REPLAY = {
    "rate": 0.0,
    "load_profile": "",
    "shape": "",
    "levels": "",
    "think_time": 0.0,
    "long_context_tokens": 0,
    "prefix_tokens": 0,
    "prefixes": 0,
    "prompt_sizes": "",
    "canary_rate": 0.0,
    "canaries": "",
}


@dataclass(frozen=True)
class Carried:
    """What a worker needs of the master's options to run its share, as Locust parsed them (the plan
    carries them: it can come before Locust's spawn message brings the rest); read again on the
    worker by `ReplaySettings.read`, as on the master."""

    log: str
    format: str
    columns: str
    max_line_bytes: int
    target_a: str
    target_b: str
    split: float | None
    mirror: bool
    salt: str
    speed: float
    start: str
    end: str
    loop: int
    max_concurrency: int
    sample: float
    session_order: str
    lang_mix: str
    force_output_length: bool
    strict: bool
    seed: int
    api: str
    model: str
    max_tokens: int
    no_stream: bool
    lang_in_body: bool
    api_key: str | None
    langs: str
    host: str | None

    @classmethod
    def of(cls, o: Namespace | Carried) -> Carried:
        return cls(**{f.name: getattr(o, f.name) for f in fields(cls)})


def add_replay_arguments(parser: ArgumentParser) -> None:
    """The load test's options, then the replay's."""
    add_arguments(parser)
    g = parser.add_argument_group("llmchaos replay")
    g.add_argument("--log", default="", help="the recorded log or trace to replay")
    g.add_argument("--format", default="auto", help=f"the log's format: {', '.join(NAMES)}")
    g.add_argument("--columns", default="", help="our field=the log's name,... e.g. ts=time,user=meta.user_id")
    g.add_argument(
        "--max-line-bytes",
        type=int,
        default=MAX_LINE_BYTES,
        help="a longer log line is skipped and counted (too_long); memory follows it",
    )
    g.add_argument("--target-a", default="", help="version A's base URL (default: --host)")
    g.add_argument("--target-b", default="", help="version B's base URL")
    g.add_argument("--split", type=float, default=None, help="percent of users sent to B (by FNV-1a 64 of user_id)")
    g.add_argument("--mirror", action="store_true", help="send every request to A and B at the same instant")
    g.add_argument("--salt", default="", help="put before each user id when splitting: another assignment")
    g.add_argument("--speed", type=float, default=1.0, help="replay X times faster than recorded")
    g.add_argument("--start", default="0s", help="replay the log from this far into it")
    g.add_argument("--end", default="", help="... up to this far into it (default: its end)")
    g.add_argument("--loop", type=int, default=1, help="replay the window N times, back to back")
    g.add_argument(
        "--max-concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help="most requests in flight at once (the replay's users; -u and -r are not used)",
    )
    g.add_argument("--sample", type=float, default=1.0, help="keep this fraction of users (whole users and sessions)")
    g.add_argument(
        "--session-order",
        choices=["strict", "after-end", "timed"],
        default="strict",
        help="strict: a session's turn waits for the one before to end; after-end: and then the time the log "
        "has between them (sped up); timed: each at its offset",
    )
    g.add_argument("--lang-mix", default="", help="languages of users the log gives none, e.g. en=10,zh=6,ja=4")
    g.add_argument(
        "--force-output-length",
        action="store_true",
        help="ask for exactly the recorded output length (OpenAI APIs: ignore_eos and min_tokens, as vLLM takes)",
    )
    g.add_argument("--strict", action="store_true", help="a bad log line is an error (exit 2), not skipped")


@dataclass(frozen=True)
class ReplaySettings:
    """What the replay options mean for this run (UsageError on bad input)."""

    source: LogSource
    targets: dict[str, str]  # side -> base URL
    mode: str  # single | split | mirror
    split: float | None
    salt: str
    speed: float
    start: float
    end: float | None
    loop: int
    sample: float
    session_order: str
    mix: LangMix
    force_output: bool
    strict: bool
    seed: int
    langs: frozenset[str]  # the log's languages kept (empty: all)
    options: Carried  # as the plan sends them

    @classmethod
    def read(cls, o: Namespace | Carried) -> ReplaySettings:
        for name, default in NOT_IN_REPLAY.items():
            if getattr(o, name, default) != default:
                raise UsageError(
                    "not used by a replay (its schedule and prompts are the log's)", field="--" + name.replace("_", "-")
                )
        if not o.log:
            raise UsageError("give the log to replay", field="--log")
        concurrency(o)
        target_a = o.target_a or o.host or ""
        if not target_a:
            raise UsageError("give version A's base URL (or --host)", field="--target-a")
        targets = {"a": target_a.rstrip("/")}
        if o.target_b:
            targets["b"] = o.target_b.rstrip("/")
            if targets["b"] == targets["a"]:
                raise UsageError("B must be another URL than A (the metrics tell them apart by it)", field="--target-b")
            if getattr(o, "energy_from", ""):  # the master's: one source's joules shared over both versions' tokens
                raise UsageError("reads one target's GPUs: replay A and B apart to cost each", field="--energy-from")
        mode = _mode(o, "b" in targets)
        start = duration(o.start, "--start")
        end = duration(o.end, "--end") if o.end else None
        if end is not None and end <= start:
            raise UsageError(f"must be after --start ({start:g}s)", field="--end")
        return cls(
            source(
                o.log,
                o.format,
                column_map.parse(o.columns),
                int(check_number(o.max_line_bytes, 1, math.inf, True, "--max-line-bytes")),
            ),
            targets,
            mode,
            o.split,
            o.salt,
            check_number(o.speed, 0, math.inf, False, "--speed"),
            start,
            end,
            int(check_number(o.loop, 1, math.inf, True, "--loop")),
            check_number(o.sample, 0, 1, False, "--sample"),
            o.session_order,
            LangMix.parse(o.lang_mix),
            o.force_output_length,
            o.strict,
            o.seed,
            frozenset(t.strip() for t in (o.langs or "").split(",") if t.strip()),
            Carried.of(o),
        )

    @property
    def sides(self) -> tuple[str, ...]:
        return tuple(self.targets)


def _mode(o: Namespace | Carried, has_b: bool) -> str:
    if o.mirror and o.split is not None:
        raise UsageError("give --split or --mirror, not both", field="--mirror")
    if not has_b:
        if o.mirror or o.split is not None:
            raise UsageError("needs --target-b", field="--mirror" if o.mirror else "--split")
        return "single"
    if o.mirror:
        return "mirror"
    if o.split is None:
        raise UsageError("with two targets, give --split N (percent of users to B) or --mirror", field="--split")
    check_number(o.split, 0, 100, True, "--split")
    return "split"


def concurrency(o: Namespace | Carried) -> int:
    """The replay's users: the most requests in flight at once (a mirrored pair counts once)."""
    return int(check_number(o.max_concurrency, 1, math.inf, True, "--max-concurrency"))
