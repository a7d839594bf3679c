"""llmchaos load test: `locust -f loadtests/locustfile.py --host URL --api openai-chat|openai-completions|gemini`.

One user class per language of the registry (EnUser, DeUser, ...), each streaming
from the target while llmchaos measures TTFT, inter-token latency and end-to-end
time per request; see `--help` for the llmchaos options.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from locust import LoadTestShape  # noqa: E402

from loadtests import plugin  # noqa: E402
from loadtests.users import USER_CLASSES  # noqa: E402

plugin.install()
globals().update({cls.__name__: cls for cls in USER_CLASSES.values()})


class LLMShape(LoadTestShape):
    """Users (closed loop) or the concurrency cap (open loop) from --load-profile/--shape; else -u/-r/-t."""

    use_common_options = True

    def tick(self) -> tuple[int, float] | None:
        env = self.runner.environment
        o, prof = env.parsed_options, env.llmchaos.settings.profile
        users, rate, t = o.num_users or 1, o.spawn_rate or 1.0, self.get_run_time()
        if o.run_time and t >= o.run_time:  # Locust leaves -t to a shape
            return None
        if prof is None:
            return users, rate
        i, stage, _ = prof.at(t)
        if i < 0:
            return None
        if env.llmchaos.settings.open_loop:
            return users, rate
        return prof.users(t) or users, stage.spawn_rate or rate
