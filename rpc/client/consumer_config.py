"""``ConsumerConfig``: a ``Consumer``'s settings, checked by their rules table.

``Consumer.__init__`` builds one from its arguments (their defaults are this class's)
and keeps each setting as its own public attribute, which its parts read
(``consumer_settings``). A refusal is one line naming the setting, the value and what
is allowed (``engine.base.config_rules``):

    consumer config max_poll_records is 0, expected 1 or more
    consumer config auto_offset_reset is 'smallest', expected one of earliest, latest, none

``consumer_timeout_ms`` may be None (iteration never stops by itself). The rule between
settings is checked after the table, in the same words: a static member
(``group_instance_id``) is a member of a group.
"""

from __future__ import annotations

from dataclasses import dataclass

from twinlog.engine.base.config_rules import (
    NON_NEGATIVE,
    POSITIVE,
    ConfigRules,
    Flag,
    Number,
    OneOf,
    Optional,
)
from twinlog.engine.base.units import MEBIBYTE
from twinlog.rpc.client.consumer_subscription import OFFSET_RESETS
from twinlog.rpc.client.timeouts import DEFAULT_API_TIMEOUT_MS

# kafka-python's consumer_timeout_ms: any number of milliseconds, its default infinity.
CONSUMER_TIMEOUT = Number(0)


@dataclass(frozen=True)
class ConsumerConfig:
    group_id: str | None = None
    auto_offset_reset: str = "latest"
    fetch_max_bytes: int = 1 * MEBIBYTE
    fetch_max_wait_ms: int = 500
    max_poll_records: int = 500
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5_000
    group_instance_id: str | None = None
    session_timeout_ms: int = 45_000
    max_poll_interval_ms: int = 300_000
    metadata_max_age_ms: int = 300_000
    consumer_timeout_ms: float | None = None  # None: iteration never stops by itself
    default_api_timeout_ms: int = DEFAULT_API_TIMEOUT_MS

    def __post_init__(self) -> None:
        RULES.check(self)
        if self.group_instance_id is not None and not self.group_id:
            raise RULES.refuse(
                "group_instance_id",
                self.group_instance_id,
                "None without a group: pass group_id= too",
            )


RULES = ConfigRules(
    "consumer config",
    {
        "auto_offset_reset": OneOf(OFFSET_RESETS),
        "fetch_max_bytes": POSITIVE,
        "fetch_max_wait_ms": NON_NEGATIVE,  # 0: a fetch answers at once, as Kafka's
        "max_poll_records": POSITIVE,
        "enable_auto_commit": Flag(),
        "auto_commit_interval_ms": POSITIVE,
        "session_timeout_ms": POSITIVE,
        "max_poll_interval_ms": POSITIVE,
        "metadata_max_age_ms": POSITIVE,
        "default_api_timeout_ms": POSITIVE,
        "consumer_timeout_ms": Optional(CONSUMER_TIMEOUT, "never"),
    },
    # Names, used as given (the group's coordinator says what is wrong with one); a
    # static member needs a group: above.
    free=("group_id", "group_instance_id"),
)
