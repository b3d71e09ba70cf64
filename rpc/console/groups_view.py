"""The Consumer groups pages: the list, and one group's members, lag per partition (numbers
and a chart) and offset resets (a dry run first, then the same reset for real)."""

from __future__ import annotations

from dataclasses import dataclass, field

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.groups.group_calls import GroupListing, MemberDescription
from twinlog.rpc.client.group_offsets import OffsetReset, PartitionLag, ResetTo
from twinlog.rpc.console.charts import bar_chart
from twinlog.rpc.console.messages_view import parse_time_ms
from twinlog.rpc.console.problems import Problem, attempt
from twinlog.rpc.console.session import ClusterSession

RESET_TARGETS = ("earliest", "latest", "offset", "timestamp", "shift")


@dataclass
class GroupsView:
    rows: list[GroupListing] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


@dataclass
class GroupView:
    group_id: str
    state: str = ""
    group_epoch: int = 0
    members: list[MemberDescription] = field(default_factory=list)
    lags: list[PartitionLag] = field(default_factory=list)
    total_lag: int = 0
    lag_chart: str = ""
    topics: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def build_groups(session: ClusterSession) -> GroupsView:
    view = GroupsView()
    with session.bounded():
        listings = attempt(session.admin.list_groups, "the consumer groups", view.problems)
    view.rows = sorted(listings or [], key=lambda item: item.group_id)
    return view


def build_group(session: ClusterSession, group_id: str) -> GroupView:
    view = GroupView(group_id)
    with session.bounded():
        description = attempt(
            lambda: session.admin.describe_group(group_id), f"group {group_id}", view.problems
        )
        lags = attempt(
            lambda: session.admin.group_offsets(group_id),
            f"the offsets of group {group_id}",
            view.problems,
        )
    if description is not None:
        view.state, view.group_epoch = description.state, description.group_epoch
        view.members = list(description.members)
    view.lags = lags or []
    view.total_lag = sum(row.lag or 0 for row in view.lags)
    view.topics = sorted({row.topic for row in view.lags})
    view.lag_chart = bar_chart(
        f"lag of group {group_id} per partition",
        [
            (f"{row.topic}-{row.partition}", float(row.lag))
            for row in view.lags
            if row.lag is not None
        ],
        "records behind, per partition",
    )
    return view


def reset_target(kind: str, value: str) -> ResetTo:
    """The form's target as the client's ResetTo; InvalidConfigError naming a bad value."""
    if kind == "earliest":
        return ResetTo.earliest()
    if kind == "latest":
        return ResetTo.latest()
    if kind == "timestamp":
        return ResetTo.timestamp(parse_time_ms(value))
    if kind not in ("offset", "shift"):
        raise InvalidConfigError(
            f"unknown reset target {kind!r}: one of {', '.join(RESET_TARGETS)}"
        )
    try:
        number = int(value.strip())
    except ValueError:
        raise InvalidConfigError(f"{kind}: {value!r} is not a whole number") from None
    return ResetTo.offset(number) if kind == "offset" else ResetTo.shift_by(number)


def reset_offsets(
    session: ClusterSession, group_id: str, topic: str, to: ResetTo, dry_run: bool
) -> list[OffsetReset]:
    """Every partition of ``topic``; the group must be empty for the real reset."""
    with session.bounded():
        return session.admin.reset_group_offsets(group_id, topic, to, dry_run=dry_run)
