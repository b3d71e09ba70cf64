"""The records ``twinlog produce`` reads from stdin, numbered by input line.

``--format text``: each line is a value (its bytes as they are, without the line
end), or ``KEY<sep>VALUE`` with ``--key-separator``. ``--format json``: each line is
one object as ``record_json`` describes (the output of ``consume --format json``);
an empty line is skipped. ``--header KEY=VALUE`` adds headers to every record,
after the line's own.

A line that does not parse raises ``BadLineError`` naming its number, or with
``skip_bad_lines`` is counted and skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from twinlog.rpc.cli.arguments import UsageError
from twinlog.rpc.cli.record_json import Header, RecordInput, record_from_json

FIRST_BAD_LINES_MAX = 5


class BadLineError(UsageError):
    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"input line {line}: {problem}")
        self.line = line


def without_line_end(raw_line: bytes) -> bytes:
    """The line without its one line end (``\\n`` or ``\\r\\n``): any other byte is data."""
    for line_end in (b"\r\n", b"\n"):
        if raw_line.endswith(line_end):
            return raw_line[: -len(line_end)]
    return raw_line


class InputReader:
    def __init__(
        self,
        lines: Iterable[bytes],
        input_format: str,
        encoding: str,
        key_separator: bytes | None = None,
        headers: tuple[Header, ...] = (),
        skip_bad_lines: bool = False,
    ) -> None:
        self.lines = lines
        self.input_format = input_format
        self.encoding = encoding
        self.key_separator = key_separator
        self.headers = headers
        self.skip_bad_lines = skip_bad_lines
        self.skipped_lines: list[int] = []  # the first few
        self.skipped = 0
        self.first_problem = ""

    def __iter__(self) -> Iterator[tuple[int, RecordInput]]:
        for number, raw_line in enumerate(self.lines, start=1):
            line = without_line_end(raw_line)
            if self.input_format == "text":
                yield number, self._text_record(line)
                continue
            if not line.strip():
                continue
            try:
                record = record_from_json(line, self.encoding)
            except ValueError as error:
                self._bad_line(number, str(error))
                continue
            yield number, record._replace(headers=record.headers + self.headers)

    def _text_record(self, line: bytes) -> RecordInput:
        key = None
        if self.key_separator is not None and self.key_separator in line:
            key, _, line = line.partition(self.key_separator)
        return RecordInput(key, line, self.headers, None, None)

    def _bad_line(self, number: int, problem: str) -> None:
        if not self.skip_bad_lines:
            raise BadLineError(number, problem)
        self.skipped += 1
        if len(self.skipped_lines) < FIRST_BAD_LINES_MAX:
            self.skipped_lines.append(number)
        self.first_problem = self.first_problem or problem

    def skipped_text(self) -> str | None:
        if not self.skipped:
            return None
        lines = ", ".join(str(line) for line in self.skipped_lines)
        return f"skipped {self.skipped} bad input lines (first: {lines}): {self.first_problem}"
