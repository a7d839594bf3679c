"""Correctness canaries: prompts with a known answer, sent greedily (temperature 0, a seed) among the
load, their answers checked. A canary that ends `ok` with an answer failing its check is `wrong`:
HTTP 200, the stream whole, the answer garbage (a model that lost its GPU, a proxy that corrupts).

A canary file (YAML) lists them, each for one language (and optionally only some APIs)::

    seed: 1234            # defaults for every canary (each may give its own)
    max_tokens: 16
    canaries:
      - lang: en
        prompt: "What is the capital of France? Answer with one word."
        expect: {contains: Paris}       # one of equals, contains, regex (searched)
        api: [openai-chat, gemini]      # optional: only under these APIs
        name: en-capital                # optional: canaries[i] otherwise
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from importlib import resources

import yaml

from llmchaos import languages, yamlfile
from llmchaos.errors import UsageError
from loadtests.adapters import ADAPTERS

CHECKS = {"equals": "be", "contains": "contain", "regex": "match"}  # check -> how its failure reads
SHOWN = 60  # characters of an answer a `wrong` record's error shows


def reference_file() -> str:
    """The canaries the reference server's sim engine answers (its greedy answers, per API)."""
    return str(resources.files("loadtests") / "canaries" / "reference.yaml")


@dataclass(frozen=True)
class Canary:
    name: str
    lang: str
    prompt: str
    check: str  # one of CHECKS
    expected: str
    max_tokens: int
    seed: int
    apis: frozenset[str]  # empty: every API

    def fault(self, answer: str) -> str | None:
        """Why `answer` fails this canary's check; None when it passes."""
        if self.check == "equals":
            passed = answer == self.expected
        elif self.check == "contains":
            passed = self.expected in answer
        else:
            passed = re.search(self.expected, answer) is not None
        if passed:
            return None
        shown = answer if len(answer) <= SHOWN else answer[:SHOWN] + "…"
        return f"canary {self.name}: expected it to {CHECKS[self.check]} {self.expected!r}, answered {shown!r}"


class Canaries:
    """A run's canaries, one seeded draw per request of each language: a canary with probability
    `rate`, which one at random among the language's."""

    def __init__(self, by_lang: ByLang, rate: float, seed: int) -> None:
        self.by_lang, self.rate = by_lang, rate
        self._rngs = {lang: random.Random(f"{seed}:{lang}:canary") for lang in by_lang}

    def draw(self, lang: str) -> Canary | None:
        """The canary this request of `lang` is, or None (an ordinary prompt)."""
        rng = self._rngs[lang]
        if rng.random() >= self.rate:
            return None
        options = self.by_lang[lang]
        return options[rng.randrange(len(options))]


ByLang = dict[str, tuple[Canary, ...]]


def load(path: str, langs: tuple[str, ...], api: str) -> ByLang:
    """The canaries of `path` for each of `langs` under `api`; every language of the run needs one
    (UsageError naming the file, line and field otherwise)."""
    root, r = yamlfile.compose(path), yamlfile.Reader(path)
    top = r.mapping(root, "", "a canary file is a mapping with 'canaries'")
    for name, (k, _) in top.items():
        if name not in ("canaries", "seed", "max_tokens"):
            raise r.fail(k, name, "unknown field")
    if "canaries" not in top:
        raise r.fail(root, "canaries", "missing")
    defaults = {"seed": 0, "max_tokens": 16}
    for name in defaults:
        if name in top:
            defaults[name] = _whole(r, top[name][1], name, 0 if name == "seed" else 1)
    items = top["canaries"][1]
    if not isinstance(items, yaml.SequenceNode) or not items.value:
        raise r.fail(items, "canaries", "must be a non-empty list")
    by_lang: dict[str, list[Canary]] = {lang: [] for lang in langs}
    for i, node in enumerate(items.value):
        canary = _canary(r, node, f"canaries[{i}]", defaults)
        if canary.lang in by_lang and (not canary.apis or api in canary.apis):
            by_lang[canary.lang].append(canary)
    if missing := [lang for lang, found in by_lang.items() if not found]:
        raise UsageError(
            f"no canary for {', '.join(missing)} under {api} (give them, or leave those out with --langs)",
            file=path,
            field="canaries",
        )
    return {lang: tuple(found) for lang, found in by_lang.items()}


def _whole(r: yamlfile.Reader, node: yaml.Node, where: str, least: int) -> int:
    v = r.value(node, where)
    if not isinstance(v, int) or isinstance(v, bool) or v < least:
        raise r.fail(node, where, f"must be a whole number of at least {least}, got {v!r}")
    return v


def _text(r: yamlfile.Reader, node: yaml.Node, where: str) -> str:
    v = r.value(node, where)
    if not isinstance(v, str) or not v:
        raise r.fail(node, where, f"must be a non-empty string, got {v!r}")
    return v


def _canary(r: yamlfile.Reader, node: yaml.Node, where: str, defaults: dict[str, int]) -> Canary:
    fields = r.mapping(node, where)
    for name, (k, _) in fields.items():
        if name not in ("name", "lang", "prompt", "expect", "api", "max_tokens", "seed"):
            raise r.fail(k, f"{where}.{name}", "unknown field")
    for name in ("lang", "prompt", "expect"):
        if name not in fields:
            raise r.fail(node, f"{where}.{name}", "missing")
    lang = _text(r, fields["lang"][1], f"{where}.lang")
    if lang not in languages.registry():
        raise r.fail(fields["lang"][1], f"{where}.lang", f"unknown language {lang!r}")
    expect = r.mapping(fields["expect"][1], f"{where}.expect", f"must be a mapping of one of {', '.join(CHECKS)}")
    if len(expect) != 1 or next(iter(expect)) not in CHECKS:
        raise r.fail(fields["expect"][1], f"{where}.expect", f"give exactly one of {', '.join(CHECKS)}")
    ((check, (_, value)),) = expect.items()
    expected = _text(r, value, f"{where}.expect.{check}")
    if check == "regex":
        try:
            re.compile(expected)
        except re.error as e:
            raise r.fail(value, f"{where}.expect.regex", f"not a regular expression: {e}") from None
    apis: frozenset[str] = frozenset()
    if "api" in fields:
        given = r.value(fields["api"][1], f"{where}.api")
        if not isinstance(given, list) or not given or any(a not in ADAPTERS for a in given):
            raise r.fail(fields["api"][1], f"{where}.api", f"must be a list of {', '.join(sorted(ADAPTERS))}")
        apis = frozenset(given)
    return Canary(
        name=_text(r, fields["name"][1], f"{where}.name") if "name" in fields else where,
        lang=lang,
        prompt=_text(r, fields["prompt"][1], f"{where}.prompt"),
        check=check,
        expected=expected,
        max_tokens=_whole(r, fields["max_tokens"][1], f"{where}.max_tokens", 1)
        if "max_tokens" in fields
        else defaults["max_tokens"],
        seed=_whole(r, fields["seed"][1], f"{where}.seed", 0) if "seed" in fields else defaults["seed"],
        apis=apis,
    )
