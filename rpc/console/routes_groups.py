"""``/groups``: the list, one group (refreshed every few seconds unless paused), and an
offset reset: the form leads to a dry run showing each partition's offset before and
after, whose confirmation POSTs the same reset for real."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from twinlog.rpc.console.groups_view import (
    RESET_TARGETS,
    build_group,
    build_groups,
    reset_offsets,
    reset_target,
)
from twinlog.rpc.console.state import console_state, logged_action

REFRESH_S = 5

groups = Blueprint("groups", __name__)


@groups.get("/groups")
def listing() -> str:
    view = build_groups(console_state().session)
    return render_template("groups.html", view=view, page="groups")


@groups.get("/groups/<group_id>")
def detail(group_id: str) -> tuple[str, int]:
    view = build_group(console_state().session, group_id)
    paused = request.args.get("pause") == "1"
    status = view.problems[0].http_status if view.problems and not view.state else 200
    page = render_template(
        "group.html",
        view=view,
        targets=RESET_TARGETS,
        refresh_s=None if paused else REFRESH_S,
        paused=paused,
        page="groups",
    )
    return page, status


def _reset_form(source: dict[str, str]) -> tuple[str, str, str]:
    return source.get("topic", ""), source.get("target", ""), source.get("value", "")


@groups.get("/groups/<group_id>/reset")
def dry_run(group_id: str) -> str:
    topic, target, value = _reset_form(request.args)
    rows = reset_offsets(
        console_state().session, group_id, topic, reset_target(target, value), dry_run=True
    )
    return render_template(
        "group_reset.html",
        group_id=group_id,
        topic=topic,
        target=target,
        value=value,
        rows=rows,
        page="groups",
    )


@groups.post("/groups/<group_id>/reset")
def apply(group_id: str) -> Response:
    topic, target, value = _reset_form(request.form)
    fields = {"group": group_id, "topic": topic, "target": target, "value": value}
    with logged_action("console.group.reset", **fields):
        rows = reset_offsets(
            console_state().session, group_id, topic, reset_target(target, value), dry_run=False
        )
    moved = ", ".join(f"{row.topic}-{row.partition} to {row.new_offset}" for row in rows)
    flash(f"reset group {group_id}: {moved}")
    return redirect(url_for("groups.detail", group_id=group_id))
