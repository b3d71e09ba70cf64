"""``twinlog zookeeper start``: a ZooKeeper server for development, from PySpark's jars.

Kafka ships ``zookeeper-server-start.sh`` for the same job. It runs in the foreground
until Ctrl-C or SIGTERM, bound to 127.0.0.1 only; production points brokers at a real
ensemble (docs/zookeeper.md). The data directory keeps the znodes across restarts.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType
from typing import Any

from twinlog.rpc.cli.common import add_command

EXAMPLE = """
twinlog zookeeper start --data-dir ./zk                 # 127.0.0.1:2181, until Ctrl-C
twinlog zookeeper start --data-dir ./zk --port 0        # a free port, printed
"""
DEFAULT_PORT = 2181  # ZooKeeper's own default client port
WATCH_INTERVAL_S = 0.5  # how often the foreground loop looks for a server that died


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "zookeeper",
        "run a local ZooKeeper server for development (Java 17, PySpark's jars)",
        EXAMPLE,
        [],
    )
    actions = parser.add_subparsers(dest="zookeeper_action", required=True, metavar="ACTION")
    start = add_command(actions, "start", "start ZooKeeper in the foreground", EXAMPLE, [])
    start.add_argument("--data-dir", required=True, help="ZooKeeper's data directory (created)")
    start.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"client port on 127.0.0.1 (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    start.add_argument(
        "--tick-time-ms",
        type=int,
        default=2000,
        help="ZooKeeper's tickTime: sessions last 2 to 20 ticks (default 2000)",
    )
    start.set_defaults(run=run_start)


def run_start(args: argparse.Namespace) -> int:
    from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper

    stop_requested = threading.Event()

    def on_signal(number: int, frame: FrameType | None) -> None:
        stop_requested.set()

    previous = {
        number: signal.signal(number, on_signal) for number in (signal.SIGTERM, signal.SIGINT)
    }
    server = LocalZooKeeper(args.data_dir, tick_time_ms=args.tick_time_ms, port=args.port)
    try:
        server.start()
        print(
            f"ZooKeeper is serving on {server.connect_string} (data {server.scratch_dir}, "
            f"log {server.log_path}); Ctrl-C stops it",
            flush=True,
        )
        while not stop_requested.wait(WATCH_INTERVAL_S):
            status = server.exited()
            if status is not None:
                print(
                    f"ZooKeeper exited on its own with status {status}; see {server.log_path}",
                    file=sys.stderr,
                )
                return 1
        print("stopping ZooKeeper", flush=True)
        return 0
    finally:
        server.stop()
        for number, handler in previous.items():
            signal.signal(number, handler)
