"""How long a single node takes to open with many partitions.

    python -m bench.open_time                        # 20 topics x 50 partitions, 2 reopens
    python -m bench.open_time --topics 4 --partitions 10 --reopens 3

Creates the topics in a temporary directory (``--dir`` to choose where), closes the
broker, then opens it again ``--reopens`` times and prints each open's wall time. An
open recovers every partition's data log, replays its journal log into LMDB, lets the
sole member lead every partition and waits for every coordinator to load: what a
restart costs before the first request is served. A measurement, not a test: nothing
fails because a machine is slow.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from twinlog.engine.broker.broker import Broker


def measure(directory: Path, topics: int, partitions: int, reopens: int) -> list[float]:
    """Seconds of each reopen of a broker holding ``topics`` x ``partitions``."""
    with Broker.open(directory) as broker:
        for index in range(topics):
            broker.create_topic(f"t{index}", partitions)
    seconds = []
    for _ in range(reopens):
        started = time.monotonic()
        broker = Broker.open(directory)
        seconds.append(time.monotonic() - started)
        broker.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=50, help="per topic")
    parser.add_argument("--reopens", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=None, help="default: a temporary one")
    args = parser.parse_args()
    if min(args.topics, args.partitions, args.reopens) < 1:
        parser.error("--topics, --partitions and --reopens must be 1 or more")
    with tempfile.TemporaryDirectory(dir=args.dir) as root:
        seconds = measure(Path(root) / "data", args.topics, args.partitions, args.reopens)
    total = args.topics * args.partitions
    print(f"open with {total} partitions: " + ", ".join(f"{s * 1000:.0f} ms" for s in seconds))


if __name__ == "__main__":
    main()
