"""The `llmchaos` command: a dispatcher to the subcommands each component owns.

A component registers its subcommands under the entry-point group `llmchaos.commands`
(pyproject.toml); each entry is a `register(subparsers)` that adds parsers whose default
`func(args)` runs the command. The core knows none of them by name.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import NoReturn, TypeVar

import llmchaos
from llmchaos import __version__
from llmchaos.errors import UsageError

GROUP = "llmchaos.commands"
Subparsers = argparse._SubParsersAction  # argparse has no public name for what add_subparsers returns
N = TypeVar("N", int, float)


def positive(kind: Callable[[str], N], most: float = math.inf) -> Callable[[str], N]:
    """An argparse type: a finite number of `kind` above zero (and at most `most`)."""

    def parse(text: str) -> N:
        value = kind(text)
        if not (math.isfinite(value) and 0 < value <= most):
            raise argparse.ArgumentTypeError(f"must be a finite number > 0{_at_most(most)}, got {text}")
        return value

    return parse


def non_negative(text: str) -> float:
    """An argparse type: a finite float at or above zero."""
    value = float(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def pools(text: str) -> tuple[int, int]:
    """An argparse type: `P:D`, two whole numbers above zero (prefill and decode engines)."""
    p, sep, d = text.partition(":")
    if not (sep and p.isdigit() and d.isdigit() and int(p) > 0 and int(d) > 0):
        raise argparse.ArgumentTypeError(f"must be P:D, prefill and decode engines (each at least 1), got {text!r}")
    return int(p), int(d)


def _at_most(most: float) -> str:
    return "" if most == math.inf else f" and at most {most:g}"


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusal of an argument is one line, as every other error here is (its
    subcommands' parsers are of this class too)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"llmchaos: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="llmchaos", description=llmchaos.__doc__)
    parser.add_argument("--version", action="version", version=f"llmchaos {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for entry in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        entry.load()(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # as given: a command that starts itself again
    try:
        return int(args.func(args) or 0)
    except UsageError as e:
        print(f"llmchaos: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `llmchaos ... | head` closed our stdout: Python's documented way out
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
