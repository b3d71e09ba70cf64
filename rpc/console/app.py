"""The console's Flask application: its pages (``routes_*``), its door (``guard``) and how
errors become pages (a readable message and an HTTP status, never a stack trace)."""

from __future__ import annotations

import logging

from flask import Flask, g, render_template
from werkzeug.exceptions import HTTPException

from twinlog import __version__
from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.wording import agreeing
from twinlog.rpc.console import guard
from twinlog.rpc.console.problems import Problem, problem_of
from twinlog.rpc.console.routes_groups import groups
from twinlog.rpc.console.routes_messages import messages
from twinlog.rpc.console.routes_overview import overview
from twinlog.rpc.console.routes_topics import topics
from twinlog.rpc.console.routes_transactions import transactions
from twinlog.rpc.console.session import ClusterSession
from twinlog.rpc.console.state import EXTENSION, ConsoleState

log = logging.getLogger("twinlog.console")


def create_app(session: ClusterSession) -> Flask:
    app = Flask("twinlog.rpc.console")
    app.extensions[EXTENSION] = ConsoleState(session)
    guard.install(app)
    for blueprint in (overview, topics, messages, groups, transactions):
        app.register_blueprint(blueprint)
    app.jinja_env.globals.update(server=session.target.server, version=__version__)
    app.jinja_env.autoescape = True
    app.jinja_env.filters["agreeing"] = agreeing  # {{ n }} {{ n | agreeing("topic") }}

    @app.before_request
    def bound_the_page() -> None:
        # One deadline for all the page's calls, however many parts it has.
        g.page_deadline = session.bounded()
        g.page_deadline.__enter__()

    @app.teardown_request
    def end_the_page(error: BaseException | None) -> None:
        deadline = g.pop("page_deadline", None)
        if deadline is not None:
            deadline.__exit__(None, None, None)

    @app.errorhandler(TwinlogError)
    def refused(error: TwinlogError) -> tuple[str, int]:
        problem = problem_of(error, "this")
        return render_template("error.html", problem=problem), problem.http_status

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> tuple[str, int]:
        status = error.code or 500
        problem = Problem("error", f"{status} {error.name}: {error.description}")
        return render_template("error.html", problem=problem), status

    @app.errorhandler(Exception)
    def unexpected(error: Exception) -> tuple[str, int]:
        log.exception("console page failed")
        problem = Problem(
            "error",
            f"The console failed on this page ({type(error).__name__}); its log has the "
            "details. Nothing was changed by the failure itself.",
        )
        return render_template("error.html", problem=problem), 500

    return app
