"""llmchaos load test: `locust -f loadtests/locustfile.py --host URL --api openai-chat|openai-completions|gemini`.

One user class per language of the registry (EnUser, DeUser, ...), each streaming
from the target while llmchaos measures TTFT, inter-token latency and end-to-end
time per request; `llmchaos loadtest-help` lists the llmchaos options (Locust's `--help` comes
before the locustfile is loaded, so without them).
"""

from __future__ import annotations

from locust import LoadTestShape

from loadtests import plugin
from loadtests.harness import harness
from loadtests.options import parsed_options
from loadtests.users import USER_CLASSES

plugin.install()
globals().update({cls.__name__: cls for cls in USER_CLASSES.values()})


class LLMShape(LoadTestShape):
    """Users (closed loop) or the concurrency cap (open loop) from --load-profile/--shape; else -u/-r/-t."""

    use_common_options = True

    def tick(self) -> tuple[int, float] | None:
        if self.runner is None:
            return None
        env = self.runner.environment
        settings = harness(env).settings
        o, prof = parsed_options(env), settings.profile
        users, rate, t = o.num_users or 1, o.spawn_rate or 1.0, self.get_run_time()
        if o.run_time and t >= o.run_time:  # Locust leaves -t to a shape
            return None
        if prof is None:
            return users, rate
        i, stage, _ = prof.at(t)
        if i < 0:
            return None
        if settings.open_loop:
            return users, rate
        return prof.users(t) or users, stage.spawn_rate or rate
