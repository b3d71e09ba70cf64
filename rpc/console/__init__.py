"""``twinlog console``: a web console over twinlog's own client (docs/operations.md, Console).

Pages: overview, topics, messages, consumer groups, transactions. Each page has a
view-model (``*_view.py``: plain dataclasses built from the client, free of the web
framework) and routes (``routes_*.py``: Flask blueprints rendering ``templates/``). The
console acts with the operator's token, so the broker's ACLs decide what it shows and
does. It imports the client and lower floors only, never the server.
"""
