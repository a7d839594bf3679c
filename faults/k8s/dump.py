"""Rendered Kubernetes objects written as the YAML a person reads (`llmchaos k8s render|render-load`)."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from llmchaos.errors import UsageError


def write(docs: list[dict], path: Path | None) -> None:
    text = yaml.dump_all(docs, Dumper=Dumper, sort_keys=False, width=120)
    if path is None:
        sys.stdout.write(text)
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise UsageError(e.strerror or str(e), file=str(path), field="--out") from None


class Dumper(yaml.SafeDumper):
    """Multi-line strings (the GPU Job's script, the windows' files) as blocks a person reads."""


Dumper.add_representer(
    str, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None)
)
