"""Which twin runs: the compiled hot loops, or their pure-Python references.

Every compiled module (a ``*_c`` module built from a ``.pyx`` by setup.py) has a
pure-Python twin that stays the reference: the tests run both on the same bytes and
demand the same answers. ``load`` gives the compiled module, or None when

* ``TWINLOG_NO_EXTENSIONS=1`` is in the environment (to measure or debug the
  reference, as aiokafka's ``AIOKAFKA_NO_EXTENSIONS``), or
* it was not built: the install found no C compiler (setup.py's extensions are
  optional), or the checkout was never installed.

``describe()`` says which is in use; ``twinlog --version`` and ``twinlog serve``'s
start line print it. A build that should have been compiled and was not is logged
once as a warning: everything works, at Python's speed.

Thread rule: import-time only; the answers never change in a process.
"""

from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType

log = logging.getLogger(__name__)

NO_EXTENSIONS_ENV = "TWINLOG_NO_EXTENSIONS"

# The compiled modules, each the twin of a pure-Python function (named for the reader).
COMPILED_MODULES: dict[str, str] = {
    "twinlog.engine.records._record_decoder_c": "record decoder",
    "twinlog.engine.records._batch_builder_c": "batch builder",
}

_loaded: dict[str, ModuleType | None] = {}


def disabled() -> bool:
    """Is the pure-Python reference forced (``TWINLOG_NO_EXTENSIONS`` set and not 0)?"""
    return os.environ.get(NO_EXTENSIONS_ENV, "").strip() not in ("", "0")


def load(module_name: str) -> ModuleType | None:
    """The compiled module ``module_name``, or None to use its pure-Python twin."""
    assert module_name in COMPILED_MODULES, f"{module_name} is not a known compiled module"
    if module_name in _loaded:
        return _loaded[module_name]
    module: ModuleType | None = None
    if not disabled():
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            log.warning(
                "twinlog's compiled %s is not built (%s): using the pure-Python one, "
                "several times slower. Reinstall with a C compiler (pip install -e .)",
                COMPILED_MODULES[module_name],
                error,
            )
    _loaded[module_name] = module
    return module


def describe() -> str:
    """One line: which twins are in use: "compiled (record decoder, batch builder)",
    "pure Python (TWINLOG_NO_EXTENSIONS is set)", or "pure Python (...: not built)"."""
    if disabled():
        return f"pure Python ({NO_EXTENSIONS_ENV} is set)"
    for module_name in COMPILED_MODULES:
        load(module_name)
    compiled = [COMPILED_MODULES[m] for m in COMPILED_MODULES if _loaded.get(m) is not None]
    missing = [COMPILED_MODULES[m] for m in COMPILED_MODULES if _loaded.get(m) is None]
    said = [f"compiled ({', '.join(compiled)})"] if compiled else []
    if missing:
        said.append(f"pure Python ({', '.join(missing)}: not built)")
    return "; ".join(said)
