"""``/transactions``: those in flight (refreshed every few seconds), and the admin abort
behind a confirmation page."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, url_for
from werkzeug.wrappers import Response

from twinlog.rpc.console.state import console_state, logged_action
from twinlog.rpc.console.transactions_view import (
    abort_transaction,
    build_transactions,
    find_transaction,
)

REFRESH_S = 5

transactions = Blueprint("transactions", __name__)


@transactions.get("/transactions")
def listing() -> str:
    state = console_state()
    view = build_transactions(state.session, state.tally)
    return render_template("transactions.html", view=view, refresh_s=REFRESH_S, page="transactions")


@transactions.get("/transactions/<int:transaction_id>/abort")
def confirm_abort(transaction_id: int) -> str:
    row = find_transaction(console_state().session, transaction_id)
    return render_template(
        "transaction_abort.html", transaction_id=transaction_id, row=row, page="transactions"
    )


@transactions.post("/transactions/<int:transaction_id>/abort")
def abort(transaction_id: int) -> Response:
    state = console_state()
    with logged_action("console.transaction.abort", transaction_id=transaction_id):
        abort_transaction(state.session, transaction_id, state.tally)
    flash(f"aborted transaction {transaction_id}: its records will never be read")
    return redirect(url_for("transactions.listing"))
