"""Locust users: what every user of ours is (a client per side, its requests the harness's), and the
load test's, one class per language of the registry (weights from the registry)."""

from __future__ import annotations

import random

from locust import User, tag

from llmchaos import languages
from loadtests.harness import harness
from loadtests.stream_client import StreamClient


class SidesUser(User):
    """One connection (a client) per side of the test; the harness sends, measures and records
    every request."""

    abstract = True

    def on_start(self) -> None:
        h = harness(self.environment)
        self.clients = {side: StreamClient(url, h.settings.limits) for side, url in h.source.sides.items()}
        self.number = h.user_number(type(self).__name__)

    def on_stop(self) -> None:
        for client in self.clients.values():
            client.close()


class LLMUser(SidesUser):
    """Streams completions in `lang` from the target."""

    abstract = True
    lang = "en"

    def wait_time(self) -> float:
        think = self.environment.parsed_options.think_time
        open_loop = harness(self.environment).settings.open_loop
        return random.uniform(0.0, think) if think > 0 and not open_loop else 0.0

    def generate(self) -> None:
        harness(self.environment).request(self, self.lang)


def user_class(lang: languages.Language) -> type[LLMUser]:
    """`EnUser`, `DeUser`, ...: a task tagged with the language, so `--tags de` works too."""

    @tag(lang.tag)
    def generate(self: LLMUser) -> None:
        LLMUser.generate(self)

    name = lang.tag.capitalize() + "User"
    return type(
        name,
        (LLMUser,),
        {
            "lang": lang.tag,
            "weight": lang.weight,
            "tasks": [generate],
            "__module__": __name__,
            "__doc__": f"{lang.name} ({lang.tag}).",
        },
    )


USER_CLASSES: dict[str, type[LLMUser]] = {tag_: user_class(lang) for tag_, lang in languages.registry().items()}
