"""`llmchaos logs convert|synth|stats`: recorded logs and public traces (the replay's input) written
as our JSONL, synthesised, or summarised."""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING

from llmchaos.cli import Subparsers, positive
from llmchaos.errors import UsageError
from loadtests.logs.flags import MAX_LINE_BYTES, NAMES

if TYPE_CHECKING:
    from loadtests.logs.log_record import LogRecord
    from loadtests.logs.problems import Problems


def _source_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="the log or trace (gzip read as it is; - or a pipe: read once)")
    p.add_argument("--format", default="auto", help=f"one of {', '.join(NAMES)}")
    p.add_argument("--columns", default="", help="our field=the file's name,... e.g. ts=time,user=meta.user_id")
    p.add_argument("--strict", action="store_true", help="stop at the first bad line (exit 2)")
    p.add_argument(
        "--max-line-bytes",
        type=positive(int),
        default=MAX_LINE_BYTES,
        help="a longer line is skipped and counted (too_long); memory follows it (default: %(default)s)",
    )


def _finite(kind: Callable[[str], float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = kind(text)
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be finite, got {text}")
        return value

    return parse


def register(sub: Subparsers) -> None:
    logs = sub.add_parser("logs", help="recorded logs and public traces: convert, synth, stats")
    cmds = logs.add_subparsers(dest="logs_command", required=True, metavar="COMMAND")
    c = cmds.add_parser("convert", help="write a log or trace as llmchaos JSONL")
    _source_arguments(c)
    c.add_argument("--out", default="-", help="output file (default: stdout)")
    c.set_defaults(func=run_convert)
    s = cmds.add_parser("stats", help="rate over time, language mix, length percentiles of a log")
    _source_arguments(s)
    s.add_argument("--lang-mix", default="", help="languages for lines without one (default: the registry)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", action="store_true", help="as JSON")
    s.set_defaults(func=run_stats)
    y = cmds.add_parser("synth", help="write a realistic synthetic log (llmchaos JSONL)")
    y.add_argument("--out", default="-", help="output file (default: stdout)")
    y.add_argument("--duration", default="10m", help="time the log spans, e.g. 10m")
    y.add_argument("--rate", type=positive(_finite(float)), default=2.0, help="mean requests/s")
    y.add_argument("--diurnal", type=_finite(float), default=0.5, help="the rate's daily swing, 0..1")
    y.add_argument("--period", default="24h", help="one 'day' of the swing")
    y.add_argument("--users", type=positive(int), default=500)
    y.add_argument("--lang-mix", default="", help="e.g. en=10,zh=6,ja=4 (default: the registry)")
    y.add_argument("--sessions", type=_finite(float), default=0.3, help="share of multi-turn conversations")
    y.add_argument("--turns", type=positive(int), default=4, help="most turns of a conversation")
    y.add_argument("--think", default="20s", help="mean time between a session's turns")
    y.add_argument("--api", choices=["openai-chat", "openai-completions", "gemini"], default="openai-chat")
    y.add_argument("--input-median", type=positive(_finite(float)), default=200.0, help="tokens of a turn")
    y.add_argument("--output-median", type=positive(_finite(float)), default=100.0)
    y.add_argument("--tokens-only", action="store_true", help="token counts instead of request bodies")
    y.add_argument("--seed", type=int, default=0)
    y.set_defaults(func=run_synth)


@contextlib.contextmanager
def _output(path: str) -> Iterator[IO[bytes]]:
    if path == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    try:
        with open(path, "wb") as out:
            yield out
    except OSError as e:
        raise UsageError(e.strerror or str(e), file=path) from None


@contextlib.contextmanager
def _read(args: argparse.Namespace) -> Iterator[tuple[Iterator[LogRecord], Problems, str]]:
    """The log opened once: its records (streamed), its skipped lines, its format's name; the
    skipped lines printed at the end."""
    from loadtests.logs import column_map, formats
    from loadtests.logs.problems import Problems

    path = "/dev/stdin" if args.file == "-" else args.file
    src = formats.source(path, args.format, column_map.parse(args.columns), args.max_line_bytes)
    problems = Problems(args.file, args.strict)
    with src.opened(problems) as log:
        yield log.records, problems, log.module.NAME


def _skipped(problems: Problems) -> None:
    for line in problems.lines():
        print(f"llmchaos: skipped {line}", file=sys.stderr)


def run_convert(args: argparse.Namespace) -> None:
    from loadtests.logs.convert import encoded

    with _read(args) as (records, problems, _), _output(args.out) as out:
        for line in encoded(records):
            out.write(line)
    _skipped(problems)


def run_stats(args: argparse.Namespace) -> None:
    import orjson

    from loadtests.logs import stats
    from loadtests.logs.split import LangMix

    mix = LangMix.parse(args.lang_mix)
    with _read(args) as (records, problems, name):
        data = stats.gather(records, mix, args.seed).to_json(problems)
    if args.json:
        print(orjson.dumps(data).decode())
    else:
        print(stats.render(args.file, name, data))


def run_synth(args: argparse.Namespace) -> None:
    import orjson

    from llmchaos.units import duration
    from loadtests.logs import synth
    from loadtests.logs.split import LangMix

    if not 0 <= args.diurnal <= 1:
        raise UsageError(f"must be from 0 to 1, got {args.diurnal}", field="--diurnal")
    if not 0 <= args.sessions <= 1:
        raise UsageError(f"must be from 0 to 1, got {args.sessions}", field="--sessions")
    spec = synth.Spec(
        duration=duration(args.duration, "--duration"),
        rate=args.rate,
        diurnal=args.diurnal,
        period=duration(args.period, "--period") or 1.0,
        users=args.users,
        mix=LangMix.parse(args.lang_mix),
        sessions=args.sessions,
        turns=args.turns,
        think=duration(args.think, "--think") or 1e-3,
        api=args.api,
        input_median=args.input_median,
        output_median=args.output_median,
        tokens_only=args.tokens_only,
        seed=args.seed,
    )
    with _output(args.out) as out:
        for line in synth.lines(spec):
            out.write(orjson.dumps(line) + b"\n")
