"""``/``: the Overview, refreshed every few seconds."""

from __future__ import annotations

from flask import Blueprint, render_template

from twinlog.rpc.console.overview_view import build_overview
from twinlog.rpc.console.state import console_state

REFRESH_S = 5

overview = Blueprint("overview", __name__)


@overview.get("/")
def page() -> str:
    state = console_state()
    view = build_overview(state.session, state.history)
    return render_template("overview.html", view=view, refresh_s=REFRESH_S, page="overview")
