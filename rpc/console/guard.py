"""The console's door: requests must name the console's own address (a web page elsewhere
that rebinds a name of its own to 127.0.0.1 cannot read the pages with the operator's
token), and every POST must carry the form's token (a page elsewhere cannot make the
browser delete a topic). Every answer forbids scripts, frames and anything loaded from
elsewhere (Content-Security-Policy): the pages use none.

The form token lives in the console's signed session cookie (SameSite=Strict) and in
each form; a POST without the same token is refused with 400 and changes nothing.
"""

from __future__ import annotations

import hmac
import secrets

from flask import Flask, Response, abort, request, session

TOKEN_FIELD = "csrf_token"
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
ALLOWED_HOSTS = "TWINLOG_ALLOWED_HOSTS"


def form_token() -> str:
    token = session.get(TOKEN_FIELD)
    if not isinstance(token, str):
        token = secrets.token_urlsafe(32)
        session[TOKEN_FIELD] = token
    return token


def install(app: Flask) -> None:
    """The checks of every request. ``app.config[ALLOWED_HOSTS]``: the Host headers the
    console answers (unset: any, for tests with Flask's test client; the server sets it
    once its port is bound)."""
    app.secret_key = secrets.token_bytes(32)  # a new console, new sessions
    app.config.update(SESSION_COOKIE_SAMESITE="Strict", SESSION_COOKIE_HTTPONLY=True)

    @app.before_request
    def check() -> None:
        allowed_hosts = app.config.get(ALLOWED_HOSTS)
        if allowed_hosts is not None and request.host not in allowed_hosts:
            abort(
                400,
                f"this console answers to {', '.join(sorted(allowed_hosts))} only, "
                f"not to {request.host!r}",
            )
        if request.method == "POST":
            sent = request.form.get(TOKEN_FIELD, "")
            kept = session.get(TOKEN_FIELD)
            if not isinstance(kept, str) or not hmac.compare_digest(sent, kept):
                abort(
                    400,
                    "the form's token is missing or stale: reload the page and try "
                    "again (nothing was changed)",
                )

    @app.after_request
    def lock_down(response: Response) -> Response:
        # No script, no frame, nothing from elsewhere: the pages need none of it, and an
        # injected one would act with the operator's token.
        response.headers.update(SECURITY_HEADERS)
        return response

    app.jinja_env.globals["form_token"] = form_token
