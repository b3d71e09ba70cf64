"""Errors of the Spark connector, raised on the driver (planning) or in tasks.

Spark wraps a Python exception in its own (``PythonException``,
``AnalysisException``) and keeps the message, so each message here is written
to be read in a Spark stack trace: it names the option, the value, and what to
do. Both classes subclass the engine's errors, so ``except TwinlogError``
still catches them in user code.
"""

from __future__ import annotations

from twinlog.engine.base.errors import InvalidConfigError, TwinlogError


class OptionError(InvalidConfigError):
    """An option of ``spark.read/readStream/write/writeStream.format("twinlog")`` is wrong.

    ``option`` is the option's name as documented (e.g. ``startingOffsets``).
    """

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"twinlog option {option}: {message}")
        self.option = option


class DataLossError(TwinlogError):
    """Offsets the query needs are gone (retention deleted them, or a topic was recreated).

    Raised only with ``failOnDataLoss=true`` (the default); set it to ``false`` to
    skip the lost offsets with a warning instead, as Kafka's source does.
    """
