"""The language registry: tag -> weight, SLOs and corpus files (data, not code)."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from llmchaos.errors import UsageError

ROOT = Path(__file__).parent
REGISTRY = ROOT / "registry.toml"


@dataclass(frozen=True)
class Language:
    tag: str
    name: str
    weight: float
    slo: dict[str, float] = field(default_factory=dict)

    @property
    def text_path(self) -> Path:
        return ROOT / self.tag / "text.txt"

    @property
    def prompts_path(self) -> Path:
        return ROOT / self.tag / "prompts.json"

    def text(self) -> str:
        return _read(self.text_path)

    def paragraphs(self) -> list[str]:
        return [p.strip() for p in self.text().split("\n\n") if p.strip()]

    def prompts(self) -> list[dict]:
        prompts: list[dict] = json.loads(_read(self.prompts_path))
        return prompts


@cache
def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@cache
def registry(path: Path = REGISTRY) -> dict[str, Language]:
    """Load the registry; every entry must name a weight and have its corpus folder."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise UsageError(str(e), file=str(path)) from None
    langs: dict[str, Language] = {}
    for tag, entry in raw.items():
        if not isinstance(entry.get("weight"), (int, float)) or entry["weight"] <= 0:
            raise UsageError("must be a positive number", file=str(path), field=f"{tag}.weight")
        lang = Language(tag, entry.get("name", tag), float(entry["weight"]), dict(entry.get("slo", {})))
        if not lang.text_path.is_file():
            raise UsageError(f"missing corpus {lang.text_path}", file=str(path), field=tag)
        langs[tag] = lang
    return langs


def tags() -> list[str]:
    return list(registry())


def get(tag: str) -> Language:
    try:
        return registry()[tag]
    except KeyError:
        raise UsageError(f"unknown language {tag!r} (known: {', '.join(registry())})", field="lang") from None
