"""Simulate a few days of locally randomised reports for the example collections (simulation only).

Run:  .venv/bin/python examples/ldp-covid/simulate.py [--people 100000] [--days 3]

Each simulated person holds a state (Zipf(1.1) over the 26 states, seeded) and their report is made by
the real client encoder from the secure source. One Parquet batch per day per collection.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from dprelease.dp.local.bits import SecureBits  # noqa: E402
from dprelease.dp.local.simulate import population  # noqa: E402
from dprelease.schemas.ldp import encode_batch, load_collection  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=3)
    args = parser.parse_args()
    if args.days < 1 or args.people < args.days:
        parser.error("--days must be at least 1 and --people at least --days (one report per person per day)")
    for spec in ("collection.yaml", "rappor.yaml"):
        collection = load_collection(HERE / spec)
        collection.batches.mkdir(parents=True, exist_ok=True)
        per_day = args.people // args.days
        for day in range(args.days):
            codes = population(per_day, seed=2026 + day)
            batch = encode_batch(collection, codes, SecureBits(), first_id=day * per_day, prefix=f"d{day}-")
            pq.write_table(batch, collection.batches / f"day-{day + 1}.parquet")
        print(f"{collection.name}: {args.days} batches of {per_day} reports in {collection.batches}")


if __name__ == "__main__":
    main()
