"""One way to check a configuration: a table of rules per config, refusals of one line.

Each configuration dataclass names a rule for every field in one table, and its
``__post_init__`` calls ``RULES.check(self)``:

    RULES = ConfigRules(
        "server config",
        {"port": Port(any_port=True), "fetch_wait_ms_max": POSITIVE, ...},
        free=("host", "tls_cert_file"),  # fields no rule checks: checked by hand, or not at all
    )

A refusal is an ``InvalidConfigError`` of one line that names the config, the key, the
value and what is allowed:

    server config fetch_wait_ms_max is 0, expected 1 or more
    log config retention_ms (retention.ms) is -5, expected 0..9223372036854775807 or -1 (unlimited)
    server config port is 'x', expected a TCP port 0..65535 (0 picks a free one)

A rule between fields (a default at most its maximum) is an explicit check after the
table, refused with ``RULES.refuse`` in the same words. Settings given as a mapping
(``twinlog serve --config key=value``, a topic's config) go through
``RULES.values_from``: keys are mapped to fields (an unknown one is refused, with the
nearest known keys), and text is read as each field's rule reads it.

The table names every field, ``free`` ones included, and ``check`` refuses a table that
does not (a ``TypeError``: the code is wrong, not the configuration): a field added
without a rule, or a rule for a field that went, is found by the first construction.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from twinlog.engine.base.addresses import is_port, port_range
from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.base.renamed_keys import canonical_key

MINUS_ONE = -1  # the value that means "auto" or "unlimited" where a rule allows it


class Rule:
    """What one field takes. ``accepts`` decides; ``allowed`` says it in a refusal;
    ``from_text`` reads a value given as text (left as it is when it cannot be read, so
    that the refusal quotes it)."""

    def accepts(self, value: object) -> bool:
        raise NotImplementedError

    def allowed(self, value: object) -> str:
        raise NotImplementedError

    def from_text(self, text: str) -> object:
        return text

    def shown(self, value: object) -> str:
        """The value as a refusal quotes it."""
        return repr(value)


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _span(smallest: float, largest: float | None) -> str:
    return f"{smallest} or more" if largest is None else f"{smallest}..{largest}"


@dataclass(frozen=True)
class Integer(Rule):
    """An int (never a bool) from ``smallest`` to ``largest`` (None: no upper limit);
    ``minus_one``: what -1 means where it is allowed too ("auto", "unlimited")."""

    smallest: int
    largest: int | None = None
    minus_one: str | None = None

    def accepts(self, value: object) -> bool:
        if not _is_integer(value):
            return False
        assert isinstance(value, int)
        if self.minus_one is not None and value == MINUS_ONE:
            return True
        return self.smallest <= value and (self.largest is None or value <= self.largest)

    def allowed(self, value: object) -> str:
        kind = "" if _is_integer(value) else "an integer "
        also = ""
        if self.minus_one is not None:
            also = f"{',' if self.largest is None else ''} or -1 ({self.minus_one})"
        return f"{kind}{_span(self.smallest, self.largest)}{also}"

    def from_text(self, text: str) -> object:
        try:
            return int(text.strip())
        except ValueError:
            return text


POSITIVE = Integer(1)
NON_NEGATIVE = Integer(0)


@dataclass(frozen=True)
class Number(Rule):
    """An int or float (never a bool) from ``smallest`` to ``largest`` (None: no upper
    limit); ``largest_excluded``: up to but not including ``largest``."""

    smallest: float
    largest: float | None = None
    largest_excluded: bool = False

    def accepts(self, value: object) -> bool:
        if not _is_number(value):
            return False
        assert isinstance(value, int | float)
        if value < self.smallest or self.largest is None:
            return self.smallest <= value
        return value < self.largest if self.largest_excluded else value <= self.largest

    def allowed(self, value: object) -> str:
        excluded = f" ({self.largest} excluded)" if self.largest_excluded else ""
        return f"a number {_span(self.smallest, self.largest)}{excluded}"

    def from_text(self, text: str) -> object:
        try:
            return float(text.strip())
        except ValueError:
            return text


@dataclass(frozen=True)
class OneOf(Rule):
    """One of a few strings."""

    choices: tuple[str, ...]

    def accepts(self, value: object) -> bool:
        return isinstance(value, str) and value in self.choices

    def allowed(self, value: object) -> str:
        return f"one of {', '.join(self.choices)}"


@dataclass(frozen=True)
class Flag(Rule):
    """A bool; as text true/false (yes/no, 1/0 too), in any case."""

    def accepts(self, value: object) -> bool:
        return isinstance(value, bool)

    def allowed(self, value: object) -> str:
        return "true or false"

    def from_text(self, text: str) -> object:
        word = text.strip().lower()
        if word in ("true", "yes", "1"):
            return True
        if word in ("false", "no", "0"):
            return False
        return text


@dataclass(frozen=True)
class Port(Rule):
    """A TCP port, as ``engine.base.addresses`` has it (``any_port``: 0 too, for what
    binds); ``minus_one``: what -1 means where it is allowed too ("no metrics endpoint")."""

    any_port: bool = False
    minus_one: str | None = None

    def accepts(self, value: object) -> bool:
        if not _is_integer(value):
            return False
        assert isinstance(value, int)
        return is_port(value, self.any_port) or (self.minus_one is not None and value == MINUS_ONE)

    def allowed(self, value: object) -> str:
        also = f", or -1 ({self.minus_one})" if self.minus_one is not None else ""
        return f"a TCP port {port_range(self.any_port)}{also}"

    def from_text(self, text: str) -> object:
        return Integer(0).from_text(text)


@dataclass(frozen=True)
class Text(Rule):
    """A str that ``test`` holds for, ``allowed`` saying which; ``secret``: a refusal
    gives its length only, never the text (a password, or what may hold part of one)."""

    test: Callable[[str], bool]
    description: str
    secret: bool = False

    def accepts(self, value: object) -> bool:
        return isinstance(value, str) and self.test(value)

    def allowed(self, value: object) -> str:
        return self.description

    def shown(self, value: object) -> str:
        if self.secret:
            size = len(value) if isinstance(value, str) else 0
            return f"{size} characters long (not shown)"
        return repr(value)


@dataclass(frozen=True)
class Optional(Rule):
    """None, or what ``rule`` accepts; ``none_means``: what None stands for ("the
    default", "never"), said in a refusal."""

    rule: Rule
    none_means: str

    def accepts(self, value: object) -> bool:
        return value is None or self.rule.accepts(value)

    def allowed(self, value: object) -> str:
        return f"None ({self.none_means}) or {self.rule.allowed(value)}"

    def from_text(self, text: str) -> object:
        return self.rule.from_text(text)

    def shown(self, value: object) -> str:
        return self.rule.shown(value)


@dataclass(frozen=True)
class ConfigRules:
    """The rules of one configuration's fields, and how its refusals name it.

    ``name``: how a refusal names the config ("server config" -> "server config port is
    ..."); ``free``: the fields no rule checks (paths, hosts, objects); ``aliases``:
    other keys of fields (Kafka's dotted names), key -> field, the first of a field's
    named in its refusals; ``loose_keys``: dots and dashes in a key read as underscores;
    ``refused_keys``: keys refused outright, key -> why; ``labels``: how refusals name a
    field when not by its first alias (field -> label, e.g. a Kafka name it is known by).
    """

    name: str
    rules: Mapping[str, Rule]
    free: Collection[str] = ()
    aliases: Mapping[str, str] = field(default_factory=dict)
    loose_keys: bool = False
    refused_keys: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(self.rules) | frozenset(self.free)

    def check(self, config: object) -> None:
        """InvalidConfigError, one line, for the first field of ``config`` (a dataclass
        instance) its rule refuses; TypeError when the table and the fields differ."""
        self._check_table(config)
        for name, rule in self.rules.items():
            value = getattr(config, name)
            if not rule.accepts(value):
                raise self.refuse(name, rule.shown(value), rule.allowed(value), quoted=True)

    def refuse(
        self, field_name: str, value: object, allowed: str, *, quoted: bool = False
    ) -> InvalidConfigError:
        """The one-line refusal of ``field_name``'s ``value`` (a number, or text already
        quoted: ``quoted``), ``allowed`` saying what it may be. For rules between fields."""
        shown = value if quoted or not isinstance(value, str) else repr(value)
        return InvalidConfigError(
            f"{self.name} {self.label(field_name)} is {shown}, expected {allowed}"
        )

    def label(self, field_name: str) -> str:
        """'segment_bytes (segment.bytes)': a field and its first alias, as refusals name it."""
        if field_name in self.labels:
            return self.labels[field_name]
        alias = next((key for key, target in self.aliases.items() if target == field_name), None)
        return f"{field_name} ({alias})" if alias else field_name

    def field_of(self, key: str) -> str:
        """The field ``key`` sets (aliases, loose spellings and renamed keys followed);
        InvalidConfigError for a refused or unknown key."""
        if key in self.refused_keys:
            raise InvalidConfigError(
                f"{self.name} key {key!r} is not supported: {self.refused_keys[key]}"
            )
        name = self.aliases.get(key, key)
        if self.loose_keys:
            name = name.replace(".", "_").replace("-", "_")
        name = canonical_key(name)
        if name not in self.fields:
            raise unknown_key(self.name, key, [*self.fields, *self.aliases])
        return name

    def values_from(self, mapping: Mapping[str, object]) -> dict[str, Any]:
        """``mapping``'s keys as fields, text read as each field's rule reads it (a free
        field's value as it is). A later key for the same field wins."""
        values: dict[str, Any] = {}  # Any: the config's own rules check each value
        for key, value in mapping.items():
            name = self.field_of(key)
            rule = self.rules.get(name)
            values[name] = rule.from_text(value) if rule and isinstance(value, str) else value
        return values

    def _check_table(self, config: object) -> None:
        names = {item.name for item in dataclasses.fields(config) if item.init}  # type: ignore[arg-type]
        if names != self.fields or set(self.rules) & set(self.free):
            raise TypeError(
                f"the rules of {self.name} do not match {type(config).__name__}'s fields: "
                f"no rule for {sorted(names - self.fields)}, no field for "
                f"{sorted(self.fields - names)}, both a rule and free: "
                f"{sorted(set(self.rules) & set(self.free))}"
            )


def unknown_key(config: str, key: str, known: Iterable[str]) -> InvalidConfigError:
    """The one-line refusal of a key no field has: the nearest known keys, then all."""
    names = sorted(set(known))
    nearest = difflib.get_close_matches(key, names, n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(nearest)}?)" if nearest else ""
    return InvalidConfigError(f"unknown {config} key {key!r}{hint}; known keys: {', '.join(names)}")
