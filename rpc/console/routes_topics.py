"""``/topics``: the list, one topic, creating one, deleting one (after a confirmation in
which the operator types the topic's name)."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from twinlog.rpc.console.state import console_state, logged_action
from twinlog.rpc.console.topics_view import build_topic, build_topics, create_topic, delete_topic

PARTITIONS_MAX = 10_000

topics = Blueprint("topics", __name__)


@topics.get("/topics")
def listing() -> str:
    show_internal = request.args.get("internal") == "1"
    view = build_topics(console_state().session, show_internal)
    return render_template("topics.html", view=view, show_internal=show_internal, page="topics")


@topics.get("/topics/<name>")
def detail(name: str) -> tuple[str, int]:
    view = build_topic(console_state().session, name)
    # Nothing to show (deleted meanwhile, not permitted, no answer): the problem's status.
    status = view.problems[0].http_status if view.problems and not view.partitions else 200
    return render_template("topic.html", view=view, page="topics"), status


def _whole(field: str, low: int, high: int, default: int | None) -> int | None:
    text = request.form.get(field, "").strip()
    if not text:
        return default
    if not text.isdigit() or not low <= int(text) <= high:
        abort(400, f"{field} must be a whole number from {low} to {high}, not {text!r}")
    return int(text)


@topics.post("/topics")
def create() -> Response:
    name = request.form.get("name", "").strip()
    if not name:
        abort(400, "name the topic to create")
    partitions = _whole("partitions", 1, PARTITIONS_MAX, 1) or 1
    replication_factor = _whole("replication_factor", 1, 100, None)
    with logged_action("console.topic.create", topic=name, partitions=partitions):
        create_topic(console_state().session, name, partitions, replication_factor)
    flash(f"created topic {name} with {partitions} partition(s)")
    return redirect(url_for("topics.detail", name=name))


@topics.get("/topics/<name>/delete")
def confirm_delete(name: str) -> str:
    view = build_topic(console_state().session, name)
    records = sum(
        (row.log_end_offset or 0) - (row.log_start_offset or 0) for row in view.partitions
    )
    return render_template("topic_delete.html", view=view, records=records, page="topics")


@topics.post("/topics/<name>/delete")
def delete(name: str) -> Response:
    if request.form.get("confirm_name", "") != name:
        abort(400, f"type the topic's name, {name}, to delete it (nothing was deleted)")
    with logged_action("console.topic.delete", topic=name):
        delete_topic(console_state().session, name)
    flash(f"deleted topic {name}")
    return redirect(url_for("topics.listing"))
