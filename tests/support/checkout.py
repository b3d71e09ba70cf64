"""Where the source checkout is, for tests that start processes from it (no tests here)."""

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # tests/support/checkout.py -> the checkout


def copy_of_checkout(target: Path) -> Path:
    """The checkout's tracked files (as they are on disk, edits included) copied to
    ``target``: a wheel built there leaves the checkout's ``build`` folder alone, so two
    builds, or a build and a developer's, never share it."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():  # a file deleted but not yet committed is skipped
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    return target
