"""The Spark connector vs Parquet, as part of ``make bench`` (see bench/spark_compare.py).

One pedantic round of the whole comparison (a server, a SparkSession, 1 KiB
records); the four rates go to the benchmark's extra_info and are printed.
Size it with TWINLOG_BENCH_SPARK_RECORDS (default 1,000,000; it needs ~3 GiB
of disk and a few minutes on two cores).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from bench.spark_compare import RECORDS_DEFAULT, report, run

pytest.importorskip("pyspark")


@pytest.mark.spark
def test_spark_connector_vs_parquet(benchmark: Any, tmp_path: Path) -> None:
    records = int(os.environ.get("TWINLOG_BENCH_SPARK_RECORDS", RECORDS_DEFAULT))
    results = benchmark.pedantic(run, args=(records, tmp_path), rounds=1, iterations=1)
    for measurement in results:
        assert measurement.rows == records
        benchmark.extra_info[f"{measurement.name} rows/s"] = round(measurement.rows_per_second)
    print("\n" + report(results))


def test_repeated_runs_report_the_fastest_and_at_least_one_is_asked_for() -> None:
    from bench.spark_compare import Measurement, fastest, main

    runs = [Measurement("read twinlog", 10, seconds) for seconds in (3.0, 1.5, 2.0)]
    assert fastest(runs).seconds == 1.5
    with pytest.raises(SystemExit):
        main(["--repeat", "0"])
