"""The replay's Locust users: each takes the next request due from the log and sends it to its side
(both sides, mirrored); as many users as requests may be in flight at once."""

from __future__ import annotations

from locust import User, constant, task

from loadtests.client import StreamClient


class ReplayUser(User):
    """One connection per side; the harness times and records every request."""

    wait_time = constant(0)

    def on_start(self) -> None:
        h = self.environment.llmchaos
        self.clients = {side: StreamClient(url, h.settings.limits) for side, url in h.replay.targets.items()}

    def on_stop(self) -> None:
        for c in self.clients.values():
            c.close()

    @task
    def replay(self) -> None:
        self.environment.llmchaos.replay_next(self)
