"""Run mypy on the checkout as the package ``twinlog`` (and on ``bench``): ``make lint``.

The checkout's root is the ``twinlog`` package (``setup.cfg``: ``package_dir``), and
the editable install finds it through an import hook that mypy cannot follow. So mypy
is shown a temporary folder holding one link, ``twinlog`` -> the checkout, and checks
the package through it: every ``twinlog.*`` import resolves to real files.

    python tests/support/typecheck.py [MYPY ARGUMENTS ...]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Folders of the checkout that are not part of the installed package.
EXCLUDE = r"^twinlog/(tests|bench|build|\.venv)/"


def run(arguments: list[str]) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="twinlog-typecheck-") as folder:
        os.symlink(ROOT, Path(folder) / "twinlog")
        environment = dict(os.environ, MYPYPATH=os.pathsep.join([folder, str(ROOT)]))
        command = [
            sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
            "--exclude", EXCLUDE, "-p", "twinlog", "-p", "bench", *arguments,
        ]  # fmt: skip
        return subprocess.run(
            command, cwd=folder, env=environment, capture_output=True, text=True, timeout=900
        )


if __name__ == "__main__":
    completed = run(sys.argv[1:])
    sys.stdout.write(completed.stdout + completed.stderr)
    raise SystemExit(completed.returncode)
