"""Checks every config's tests share: a refusal is one line, and a client's defaults are
its config's."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Collection
from typing import Any

import pytest

from twinlog.engine.base.errors import InvalidConfigError


def refusal(config: Callable[..., object], **changes: object) -> str:
    """The InvalidConfigError ``config(**changes)`` raises, checked to be one line."""
    with pytest.raises(InvalidConfigError) as refused:
        config(**changes)
    message = str(refused.value)
    assert "\n" not in message
    return message


def assert_defaults_are_the_config_s(
    config: type[Any], init: Callable[..., None], not_taken: Collection[str] = ()
) -> None:
    """``init`` takes every setting of ``config`` but ``not_taken`` (set another way),
    each with ``config``'s own default."""
    defaults = config()
    parameters = inspect.signature(init).parameters
    for item in dataclasses.fields(config):
        if item.name not in not_taken:
            assert item.name in parameters, item.name
            assert parameters[item.name].default == getattr(defaults, item.name), item.name
