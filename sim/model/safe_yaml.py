"""Safe YAML reading of scenario files and `--set` values: a regular file read within its
bound, decoded as UTF-8, parsed by a loader that builds only plain data (no tags, YAML
1.2 booleans) within the input limits, every problem a `ScenarioError`.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from sim.model.scenario_set import MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES, ScenarioError
from sim.model.schema import MAX_ECHO, echo


class _InputLimit(yaml.YAMLError):
    """The YAML is well-formed but refused: too deep, too large, a duplicate key."""

    def __init__(self, message: str, mark: Any = None, path: str = ""):
        super().__init__(message)
        self.message, self.mark, self.path = message, mark, path


if getattr(yaml, "__with_libyaml__", False):
    from yaml.cyaml import CParser

    class _SafeBase(Composer, CParser, SafeConstructor, Resolver):  # type: ignore[misc]
        """`yaml.SafeLoader` with libyaml's scanner and parser (a 1 MB file in seconds, not
        tens of seconds) and PyYAML's composer, which `_Loader` extends."""

        def __init__(self, stream: str):
            CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)

else:  # PyYAML built without libyaml
    _SafeBase = yaml.SafeLoader  # type: ignore[misc,assignment]


class _Loader(_SafeBase):
    """A safe loader with limits checked while composing, before anything is built:
    nesting depth (no RecursionError), values once aliases are expanded (no billion
    laughs), no recursive aliases, and no key given twice in one mapping."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0
        self._values = 0  # values composed so far, aliases expanded: stops a bomb early
        self._path: list[str] = []
        self._measured: dict[int, tuple[int, int]] = {}  # id(node): (values, height)
        self._keep: list[yaml.Node] = []  # keeps ids in _measured unique

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            node = super().compose_node(parent, index)
            if id(node) not in self._measured:
                raise _InputLimit(
                    "an alias refers to a mapping or list that contains it (a recursive structure)",
                    mark,
                )
            self._count(self._measured[id(node)][0], mark)
            return node
        self._count(1, self.peek_event().start_mark)
        if self._depth >= MAX_DEPTH:
            raise _InputLimit(
                f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark
            )
        label = (
            str(index.value)
            if isinstance(index, yaml.ScalarNode)
            else str(index)
            if isinstance(index, int)
            else None
        )
        self._depth += 1
        if label is not None:
            self._path.append(label)
        try:
            node = super().compose_node(parent, index)
            if isinstance(node, yaml.MappingNode):
                self._check_duplicates(node)
        finally:
            self._depth -= 1
            if label is not None:
                self._path.pop()
        if isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            children = node.value if isinstance(node, yaml.SequenceNode) else []
        sizes = [self._measured[id(child)] for child in children]
        values = 1 + sum(n for n, _ in sizes)
        height = 1 + max((h for _, h in sizes), default=0)
        if height > MAX_DEPTH:
            raise _InputLimit(
                f"nested deeper than {MAX_DEPTH} levels once aliases are expanded",
                node.start_mark,
            )
        self._measured[id(node)] = (values, height)
        self._keep.append(node)
        return node

    def _count(self, values: int, mark: Any) -> None:
        self._values += values
        if self._values > MAX_NODES:
            raise _InputLimit(f"expands to more than {MAX_NODES:,} values (aliases included)", mark)

    def _check_duplicates(self, node: yaml.MappingNode) -> None:
        seen: dict[tuple[str, str], yaml.Node] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                continue
            first = seen.setdefault((key.tag, key.value), key)
            if first is not key:
                raise _InputLimit(
                    f"duplicate key {echo(key.value)} (first given at line "
                    f"{first.start_mark.line + 1}); give each key once",
                    key.start_mark,
                    ".".join([*self._path, str(key.value)]),
                )


# Booleans are YAML 1.2's true and false only: PyYAML's YAML 1.1 also reads yes, no, on
# and off as booleans (a Norwegian `country: no` turns false); here they stay strings,
# which a boolean key then refuses
_BOOL = "tag:yaml.org,2002:bool"
_Loader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != _BOOL]
    for first, resolvers in _SafeBase.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    _BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def parse_yaml(text: str) -> Any:
    """`yaml.safe_load` with the limits of `_Loader`; raises `yaml.YAMLError`."""
    loader = _Loader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def yaml_problem(exc: yaml.YAMLError) -> tuple[str, str]:
    """(key path, one-line description) of a YAML error, value echoes shortened."""
    if isinstance(exc, _InputLimit):
        where = f"line {exc.mark.line + 1}, column {exc.mark.column + 1}: " if exc.mark else ""
        return exc.path, where + exc.message
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if len(problem) > 2 * MAX_ECHO:
        problem = problem[: 2 * MAX_ECHO - 3] + "..."
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return "", f"not valid YAML{where}: {problem}"


def read_yaml(path: str | Path) -> dict[str, Any]:
    source = str(path)
    data = read_regular_file(source, MAX_FILE_BYTES + 1)  # never more: a huge log
    if len(data) > MAX_FILE_BYTES:
        raise ScenarioError(
            source,
            "",
            f"larger than {MAX_FILE_BYTES:,} bytes; a scenario file is a few kilobytes of YAML",
        )
    text = _decode(source, data)
    try:
        document = parse_yaml(text)
    except yaml.YAMLError as exc:
        key, problem = yaml_problem(exc)
        raise ScenarioError(source, key, problem) from None
    if not isinstance(document, dict):
        raise ScenarioError(
            source, "", "expected a YAML mapping of sections (name, model, cluster, ...)"
        )
    return document


def read_regular_file(source: str, limit: int, what: str = "scenario file") -> bytes:
    """At most `limit` bytes of a regular file, or a ScenarioError naming it. Anything else
    (a FIFO nobody writes to, a device such as /dev/zero, a socket, a directory) is
    refused without blocking: the file is opened non-blocking and checked before a read."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ScenarioError(source, "", f"cannot read the {what} ({exc.strerror})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a directory"
                if stat.S_ISDIR(mode)
                else "a FIFO (named pipe)"
                if stat.S_ISFIFO(mode)
                else "a device"
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a socket"
                if stat.S_ISSOCK(mode)
                else "not a file"
            )
            raise ScenarioError(
                source, "", f"{kind}, not a regular file; expected the path of a YAML {what}"
            )
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as file:
            fd = -1  # the file object closes it
            return file.read(limit)
    except OSError as exc:
        raise ScenarioError(source, "", f"cannot read the {what} ({exc.strerror})") from None
    finally:
        if fd >= 0:
            os.close(fd)


def _decode(source: str, data: bytes) -> str:
    """UTF-8 (a UTF-8 byte-order mark is fine); anything else is refused with its position."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ScenarioError(
            source, "", "the file is UTF-16 (it starts with a byte-order mark); save it as UTF-8"
        )
    if b"\x00" in data:
        raise ScenarioError(
            source,
            "",
            "the file contains NUL bytes (a binary file, or UTF-16?); expected UTF-8 YAML text",
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ScenarioError(
            source,
            "",
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line}, column {column} "
            "(latin-1 or another encoding?); save the file as UTF-8",
        ) from None
