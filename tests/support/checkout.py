"""Where the source checkout is, for tests that start processes from it (no tests here)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # tests/support/checkout.py -> the checkout
