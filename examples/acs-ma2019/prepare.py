"""Convert the ACS MA 2019 excerpt (CSV, as NIST distributes it) to the example's Parquet file.

Run:  .venv/bin/python examples/acs-ma2019/prepare.py [SOURCE_DIR]   (default ../shared/data/acs-ma2019)

The conversion follows the public data dictionary only: columns whose dictionary gives a numeric range
become int64 (DENSITY float64), the literal ``N`` ("not applicable") becomes null; coded categories
stay strings exactly as written. No value is inspected to decide a type or a domain.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as csv
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
NUMERIC = {"AGEP": pa.int64(), "NOC": pa.int64(), "NPF": pa.int64(), "DENSITY": pa.float64(), "INDP": pa.int64(),
           "PINCP": pa.int64(), "POVPIP": pa.int64(), "PWGTP": pa.int64(), "WGTP": pa.int64()}
"""Numeric per the dictionary (a min and max, or a code list too long to enumerate: INDP)."""


def main() -> None:
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parents[2] / "shared" / "data" / "acs-ma2019"
    table = csv.read_csv(source / "ma2019.csv",
                         convert_options=csv.ConvertOptions(column_types=dict.fromkeys(
                             csv.read_csv(source / "ma2019.csv").column_names, pa.string())))
    columns = {}
    for name in table.column_names:
        column = table.column(name)
        column = pc.if_else(pc.equal(column, "N"), pa.scalar(None, pa.string()), column)
        columns[name] = pc.cast(column, NUMERIC[name]) if name in NUMERIC else column
    pq.write_table(pa.table(columns), HERE / "ma2019.parquet")
    print(f"{HERE / 'ma2019.parquet'}: {table.num_rows} rows, {table.num_columns} columns")


if __name__ == "__main__":
    main()
