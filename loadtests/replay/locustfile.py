"""llmchaos replay:
`locust -f loadtests/replay/locustfile.py --log FILE --target-a URL [--target-b URL --split N|--mirror]`.

Replays a recorded log or a public trace (our JSONL, OpenAI or Gemini gateway logs, Azure, Mooncake,
BurstGPT) on its recorded schedule against one target, or two split by user or mirrored; results
per side in DIR/<run_id>/a and /b. `llmchaos loadtest-help --replay` lists the options (Locust's
`--help` comes before the locustfile is loaded, so without them).
"""

from __future__ import annotations

from locust import LoadTestShape, constant, task

from loadtests import plugin
from loadtests.harness import harness
from loadtests.options import parsed_options
from loadtests.replay.settings import add_replay_arguments, concurrency
from loadtests.replay.source import ReplaySource
from loadtests.users import SidesUser

plugin.install(ReplaySource, add_replay_arguments)


class ReplayUser(SidesUser):
    """Takes the next request due from the log and sends it to its side (both, mirrored). As many
    users as requests may be in flight at once."""

    wait_time = constant(0)

    @task
    def replay(self) -> None:
        harness(self.environment).request(self)


class ReplayShape(LoadTestShape):
    """The replay's users, spawned within a quarter of a second (before the schedule starts, a second
    into the test), until the log is done (or -t is up)."""

    use_common_options = True

    def tick(self) -> tuple[int, float] | None:
        if self.runner is None:
            return None
        env = self.runner.environment
        o = parsed_options(env)
        if (o.run_time and self.get_run_time() >= o.run_time) or harness(env).finished():
            return None
        users = concurrency(o)
        return users, 4.0 * users
