"""YAML read as nodes, so every error can name the file, the line and the field."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import TypeVar

import yaml

from llmchaos.errors import UsageError

T = TypeVar("T")
MAX_BYTES = 16 << 20  # a config (a schedule, SLOs, a guard, rules) this large is no config


def compose(path: str) -> yaml.Node:
    """The document's root node; an unreadable or invalid file is a UsageError with its line."""
    node = _parse(path, yaml.compose)
    if node is None:
        raise UsageError("the file is empty", file=path, line=1)
    return node


def compose_all(path: str) -> list[yaml.Node]:
    """Each document's root node (a stream of them, as kubectl reads); errors as in `compose`."""
    nodes = _parse(path, lambda text: [n for n in yaml.compose_all(text) if n is not None])
    if not nodes:
        raise UsageError("the file holds no document", file=path, line=1)
    return nodes


def _parse(path: str, parse: Callable[[str], T]) -> T:
    text = ""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens at once, to be refused
        with open(fd, encoding="utf-8") as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise UsageError("not a regular file (a pipe or a device is no config)", file=path)
            if st.st_size > MAX_BYTES:
                raise UsageError(f"{st.st_size:,} bytes, over the {MAX_BYTES >> 20} MiB a config may have", file=path)
            text = f.read()
        return parse(text)
    except OSError as e:
        raise UsageError(str(e.strerror), file=path) from None
    except UnicodeDecodeError as e:
        raise UsageError(f"not UTF-8: {e.reason}", file=path, line=e.object.count(b"\n", 0, e.start) + 1) from None
    except yaml.reader.ReaderError as e:  # a character YAML does not allow: no mark, a position
        first = str(e).splitlines()[0]
        raise UsageError(f"invalid YAML: {first}", file=path, line=text.count("\n", 0, e.position) + 1) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise UsageError(
            f"invalid YAML: {getattr(e, 'problem', e)}", file=path, line=mark.line + 1 if mark else None
        ) from None


def value(node: yaml.Node) -> object:
    """A node's plain Python value."""
    return yaml.safe_load(yaml.serialize(node))


def line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


class Reader:
    """Reads one YAML file's nodes (from `compose`), every error naming the file, line and field."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, node: yaml.Node, field: str, message: str) -> UsageError:
        return UsageError(message, file=self.path, line=line(node), field=field or None)

    def mapping(
        self, node: yaml.Node, where: str, message: str = "must be a mapping"
    ) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """A mapping node's fields by name (each a plain word, given once)."""
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, where, message)
        items: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for k, v in node.value:
            if not isinstance(k, yaml.ScalarNode) or not k.value.isprintable() or k.value.split() != [k.value]:
                raise self.fail(k, where, "a field name must be a word")
            name = f"{where}.{k.value}" if where else k.value
            if k.value in items:
                raise self.fail(k, name, "given twice")
            items[k.value] = (k, v)
        return items

    def value(self, node: yaml.Node, where: str) -> object:
        """A node's plain Python value; a tag YAML's safe loader cannot read is an error."""
        try:
            return value(node)
        except (yaml.YAMLError, ValueError, TypeError, AttributeError) as e:
            raise self.fail(node, where, f"cannot be read: {str(e).splitlines()[0]}") from None
