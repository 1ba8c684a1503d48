"""The counting map on a Dask cluster (plain ``distributed``): same exact counts, same release, noise in the flow.

The workers run no Prefect task: they are started with a Prefect API address where nothing listens, and
the release still publishes. Needs the ``dask`` extra (``pip install '.[dask]'``); skipped without it.
"""

from __future__ import annotations

import json
import shutil
import traceback
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

distributed = pytest.importorskip("distributed")

from dprelease.dp.accounting.ledger import Ledger  # noqa: E402
from dprelease.schemas.encoding import domains_for, rules_for  # noqa: E402
from dprelease.schemas.spec import load_spec  # noqa: E402
from dprelease.tasks.ingest import row_group_refs  # noqa: E402
from dprelease.tasks.measure import Counter, map_client, map_partitions  # noqa: E402
from tests.steward import steward_of  # noqa: E402

pytestmark = pytest.mark.e2e
ADULT = Path(__file__).resolve().parents[2] / "examples" / "adult"
BOUNDS = {"fnlwgt": (10_000.0, 1_500_000.0), "capital-gain": (0.0, 100_000.0), "capital-loss": (0.0, 4_000.0)}


@pytest.fixture(scope="module")
def cluster():
    # No Prefect API reachable from the workers: a Prefect task run there would fail to report its state.
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  env={"PREFECT_API_URL": "http://127.0.0.1:9/api"}) as local:
        yield local


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    """The Adult example as a folder of 3 files in row groups of 5000 rows (9 partitions), with a bogus
    spec-level scheduler address that the CLI option must override."""
    folder = tmp_path_factory.mktemp("dask") / "example"
    (folder / "adult").mkdir(parents=True)
    shutil.copy(ADULT / "schema.yaml", folder / "schema.yaml")
    table = pq.read_table(ADULT / "adult.parquet")
    size = -(-table.num_rows // 3)
    for i in range(3):
        pq.write_table(table.slice(i * size, size), folder / "adult" / f"part-{i}.parquet", row_group_size=5000)
    doc = yaml.safe_load((ADULT / "release.yaml").read_text(encoding="utf-8"))
    doc.update(data="adult", dask={"address": "tcp://127.0.0.1:9"})
    (folder / "release.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    return folder / "release.yaml"


def test_the_map_on_the_cluster_gives_the_in_process_exact_counts(prefect_harness, cluster, example):
    spec = load_spec(example)
    assert spec.dask_address == "tcp://127.0.0.1:9"
    domains = domains_for(spec.schema, BOUNDS)
    names = [d.name for d in domains]
    rules = rules_for(spec.schema)
    workload = [(n,) for n in names] + [(names[0], names[1]), (names[3], names[0], names[5])]
    by_name = {d.name: d for d in domains}
    maps = {names[0]: np.arange(by_name[names[0]].size) // 4}  # a coarse map, as in the cliques' passes
    assert len(row_group_refs(spec.data)) == 9
    local, local_handling = Counter(spec.data, spec.schema.privacy_unit).count(domains, rules, workload, maps)
    with distributed.Client(cluster) as client, distributed.get_task_stream(client) as stream:
        with map_client(cluster.scheduler_address) as remote_client:
            remote, remote_handling = Counter(spec.data, spec.schema.privacy_unit, remote_client).count(
                domains, rules, workload, maps)
    workers = {record["worker"] for record in stream.data}
    # 9 row groups in runs of consecutive ones, two runs per worker thread: 4 map tasks on both workers
    assert len(stream.data) == 4 and workers <= set(cluster.scheduler_info["workers"])
    assert remote.keys() == local.keys()
    for columns in workload:
        np.testing.assert_array_equal(remote[columns], local[columns])
    assert remote_handling == local_handling and remote_handling.rows_in == 32561


def test_a_release_with_the_cli_dask_option_completes(harness_api, cluster, example, tmp_path, capsys,
                                                     monkeypatch):
    from dprelease.flows.cli import main

    monkeypatch.setattr("dprelease.tasks.measure.DASK_MIN_ROWS", 0)  # Adult is small: count it on the cluster anyway

    ledger = tmp_path / "ledger.sqlite"
    with distributed.Client(cluster) as client, distributed.get_task_stream(client) as stream:
        code = main(["release", str(example), "--out", str(tmp_path / "out"), "--ledger", str(ledger),
                     "--release-id", "r-dask", "--dask", cluster.scheduler_address])
    assert code == 0, capsys.readouterr().err
    # three passes of cliques: auto (1-ways, coarse pairs, coarse triples), 4 map tasks each
    assert len(stream.data) == 12
    assert {record["worker"] for record in stream.data} <= set(cluster.scheduler_info["workers"])
    target = tmp_path / "out" / "us-cps-1994-adult" / "r-dask"
    assert pq.read_metadata(target / "synthetic" / "adult.parquet").num_rows > 30_000
    assert json.loads((steward_of(target) / "row_handling.json").read_text())["rows_in"] == 32561
    with Ledger.open(ledger) as book:
        assert book.release_status("r-dask") == "published"
        assert book.status("us-cps-1994-adult").reserved == 0


def test_the_workers_import_no_prefect_run_context(cluster):
    """What the workers ran left no Prefect flow or task run context behind (plain functions only)."""
    def prefect_runs() -> list[str]:
        import sys
        context = sys.modules.get("prefect.context")
        if context is None:
            return []
        return [kind for kind in ("FlowRunContext", "TaskRunContext") if getattr(context, kind).get() is not None]

    with distributed.Client(cluster) as client:
        assert all(found == [] for found in client.run(prefect_runs).values())


def test_map_partitions_cover_every_row_group_once_in_order():
    refs = [("f", i) for i in range(1000)]
    runs = map_partitions(refs, tasks=256)
    assert len(runs) == 256 and [r for run in runs for r in run] == refs
    assert max(map(len, runs)) - min(map(len, runs)) <= 1
    assert map_partitions(refs[:3]) == [[("f", 0)], [("f", 1)], [("f", 2)]] and map_partitions([]) == []


def test_a_failure_on_a_worker_comes_back_message_free(cluster, tmp_path):
    """A library error carrying a raw value on a worker reaches the client as a message-free StageFailed."""
    import pyarrow as pa

    from dprelease.dp.measurement.marginals import ColumnDomain
    from dprelease.tasks import StageFailed
    from dprelease.tasks.ingest import remote_count_partition

    data = tmp_path / "strings.parquet"
    pq.write_table(pa.table({"x": ["CANARY_dask_Qw7"] * 3}), data)  # pyarrow's parse error quotes the value
    domains = [ColumnDomain("x", "int", edges=(0.0, 1.0, 2.0))]
    with distributed.Client(cluster) as client:
        future = client.submit(remote_count_partition, [(str(data), 0)], domains, {}, [("x",)], None, pure=False)
        with pytest.raises(StageFailed) as info:
            future.result()
        frames = "".join(traceback.format_tb(future.traceback()))
        assert frames and "CANARY" not in frames
    assert "count_row_groups" in str(info.value) and "ArrowInvalid" in str(info.value)
    assert "CANARY" not in repr(info.value) and info.value.__cause__ is None and info.value.__context__ is None


def test_a_small_table_is_counted_in_process_even_with_a_scheduler(harness_api, cluster, example, tmp_path,
                                                                   capsys, caplog):
    from dprelease.flows.cli import main

    with distributed.Client(cluster) as client, distributed.get_task_stream(client) as stream:
        code = main(["release", str(example), "--out", str(tmp_path / "out"), "--ledger", str(tmp_path / "l.sqlite"),
                     "--release-id", "r-small", "--dask", cluster.scheduler_address])
    assert code == 0, capsys.readouterr().err
    assert len(stream.data) == 0  # nothing ran on the cluster
    assert "counting in process: the table is below" in caplog.text


def test_a_cluster_lost_during_the_count_is_one_public_line():
    import time

    from dprelease.dp.errors import ReleaseError

    local = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0")
    with pytest.raises(ReleaseError, match=r"^dask: the cluster at tcp://\S+ was lost during the count \(\w+\); run "
                                           r"the same release id again"):
        with map_client(local.scheduler_address) as client:
            future = client.submit(time.sleep, 60, pure=False)
            local.close()  # the scheduler and its worker gone while a map task runs
            future.result()


def test_a_failure_of_the_map_itself_is_not_called_a_lost_cluster(cluster):
    import operator

    with pytest.raises(ZeroDivisionError):  # raised on a worker: the stage's guard keeps its text steward-only
        with map_client(cluster.scheduler_address) as client:
            client.submit(operator.truediv, 1, 0, pure=False).result()
