"""Locust users, one class per language of the registry (weights from the registry)."""

from __future__ import annotations

import random

from locust import User, tag

from llmchaos import languages
from loadtests.client import StreamClient


class LLMUser(User):
    """Streams completions in `lang` from the target; the plugin measures every request."""

    abstract = True
    lang = "en"

    def wait_time(self) -> float:
        think = self.environment.parsed_options.think_time
        return random.uniform(0.0, think) if think > 0 and not self.environment.llmchaos.settings.open_loop else 0.0

    def on_start(self) -> None:
        h = self.environment.llmchaos
        self.client = StreamClient(self.host or "", h.settings.limits)
        self.prompts = h.prompt_source(self.lang)

    def on_stop(self) -> None:
        self.client.close()

    def generate(self) -> None:
        self.environment.llmchaos.request(self)


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
