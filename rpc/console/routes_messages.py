"""``/messages``: browse a partition; ``follow=1`` reloads the last records every 2 s."""

from __future__ import annotations

from flask import Blueprint, render_template, request

from twinlog.rpc.console.bytes_view import SHOW_MODES
from twinlog.rpc.console.messages_view import (
    COUNT_DEFAULT,
    COUNT_MAX,
    STARTS,
    MessagesView,
    build_messages,
)
from twinlog.rpc.console.overview_view import is_internal
from twinlog.rpc.console.problems import attempt
from twinlog.rpc.console.state import console_state

FOLLOW_REFRESH_S = 2

messages = Blueprint("messages", __name__)


def _choice(name: str, choices: tuple[str, ...], default: str) -> str:
    value = request.args.get(name, default)
    return value if value in choices else default


def _number(name: str, default: int, high: int) -> int:
    text = request.args.get(name, "")
    return min(int(text), high) if text.isdigit() else default


@messages.get("/messages")
def page() -> str:
    session = console_state().session
    topic = request.args.get("topic", "")
    follow = request.args.get("follow") == "1"
    start = "end" if follow else _choice("start", STARTS, "end")
    view: MessagesView | None = None
    if topic:
        view = build_messages(
            session,
            topic,
            _number("partition", 0, 1_000_000),
            start,
            request.args.get("value", ""),
            max(1, _number("count", COUNT_DEFAULT, COUNT_MAX)),
            _choice("mode", SHOW_MODES, "text"),
        )
    with session.bounded():
        listed = attempt(session.admin.list_topics, "the topics", view.problems if view else [])
    names = sorted(name for name in listed or [] if not is_internal(name))
    return render_template(
        "messages.html",
        view=view,
        topic=topic,
        topics=names,
        starts=STARTS,
        modes=SHOW_MODES,
        follow=follow,
        refresh_s=FOLLOW_REFRESH_S if follow else None,
        page="messages",
    )
