"""YAML read as nodes, so every error can name the file, the line and the field."""

from __future__ import annotations

import yaml

from llmchaos.errors import UsageError


def compose(path: str) -> yaml.Node:
    """The document's root node; an unreadable or invalid file is a UsageError with its line."""
    try:
        with open(path, encoding="utf-8") as f:
            node = yaml.compose(f)
    except OSError as e:
        raise UsageError(str(e.strerror), file=path) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise UsageError(
            f"invalid YAML: {getattr(e, 'problem', e)}", file=path, line=mark.line + 1 if mark else None
        ) from None
    if node is None:
        raise UsageError("the file is empty", file=path, line=1)
    return node


def value(node: yaml.Node) -> object:
    """A node's plain Python value."""
    return yaml.safe_load(yaml.serialize(node))


def line(node: yaml.Node) -> int:
    return node.start_mark.line + 1
