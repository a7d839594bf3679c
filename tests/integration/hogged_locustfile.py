"""loadtests/locustfile.py in a generator overloaded by its own process: a native thread that holds
the interpreter in long big-number multiplications (each one bytecode: ~10 ms without a switch), so
the data plane reads late what the kernel already holds. For the validity tests only."""

from __future__ import annotations

from gevent import monkey

from loadtests.locustfile import *  # noqa: F403  (the user classes and the shape, as Locust finds them)

_start_thread = monkey.get_original("_thread", "start_new_thread")


def _hog() -> None:
    big = 7**200_000
    while True:
        big * big


_start_thread(_hog, ())
