"""llmchaos replay: `locust -f loadtests/replay.py --log FILE --target-a URL [--target-b URL --split N|--mirror]`.

Replays a recorded log or a public trace (our JSONL, OpenAI or Gemini gateway logs, Azure, Mooncake,
BurstGPT) on its recorded schedule against one target, or two split by user or mirrored; results
per side in DIR/<run_id>/a and /b. `llmchaos loadtest-help --replay` lists the options (Locust's
`--help` comes before the locustfile is loaded, so without them).
"""

from __future__ import annotations

from locust import LoadTestShape

from loadtests import plugin
from loadtests.options import parsed_options
from loadtests.replay_harness import ReplayHarness
from loadtests.replay_options import add_replay_arguments, concurrency
from loadtests.replay_users import ReplayUser

plugin.install(ReplayHarness, add_replay_arguments)
__all__ = ["ReplayShape", "ReplayUser"]


class ReplayShape(LoadTestShape):
    """The replay's users, spawned within a quarter of a second (before the schedule starts, a second
    into the test), until the log is done (or -t is up)."""

    use_common_options = True

    def tick(self) -> tuple[int, float] | None:
        if self.runner is None:
            return None
        env = self.runner.environment
        o, h = parsed_options(env), plugin.harness(env)
        if (o.run_time and self.get_run_time() >= o.run_time) or (isinstance(h, ReplayHarness) and h.finished()):
            return None
        users = concurrency(o)
        return users, 4.0 * users
