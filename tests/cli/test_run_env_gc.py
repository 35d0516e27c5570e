"""`gc --envs-unused`: cached environments no job used for a while are deleted, index first;
one in use is kept."""

from __future__ import annotations

import time

from tests.cli.conftest import one_line_error
from tests.cli.test_run import wait_for
from tests.cli.test_run_env import env_objects, index, project, run
from tpuctl.cloud.clients import ClientFactory
from tpuctl.services import env_gc

__all__ = ["index", "project"]  # the fixtures, shared
BUCKET = "tpuctl-demo-tpuctl"


def _bucket():  # noqa: ANN202
    return ClientFactory().bucket(BUCKET, "tpuctl-demo")


def test_the_plan_goes_by_the_last_use(cli, emulator, project, index) -> None:
    assert run(cli, project, index).code == 0
    objects = env_objects(emulator)
    assert any(k.endswith("/used.json") for k in objects)  # worker 0 said it used it
    assert env_gc.plan(_bucket(), unused_for=86400) == []  # used just now
    (entry,) = env_gc.plan(_bucket(), unused_for=86400, now=time.time() + 2 * 86400)
    assert {o.name for o in entry.objects} == set(objects)
    assert entry.size == sum(len(v) for v in objects.values())


def test_gc_deletes_unused_environments_and_the_next_run_builds_again(
    cli, emulator, project, index
) -> None:
    assert run(cli, project, index).code == 0
    dry = cli("gc", "--envs-unused", "30d", "--dry-run")
    assert dry.code == 0, dry.err
    assert "environments: none unused for 30 day(s)" in dry.err
    newest = max(o.updated for o in _bucket().objects("tpuctl/envs/"))
    wait_for(lambda: time.time() - newest > 1.5)  # the bucket's clock has moved past it
    listed = cli("gc", "--envs-unused", "1s", "--dry-run")
    assert "would delete environment" in listed.err and env_objects(emulator)
    r = cli("gc", "--envs-unused", "1s", "--yes")
    assert r.code == 0, r.err
    assert "deleted 1 environment(s)" in r.err
    assert env_objects(emulator) == {}
    asked = index.count()
    again = run(cli, project, index)
    assert again.code == 0 and "built on 1 worker(s)" in again.err
    assert index.count() > asked


def test_bucket_needs_envs_unused(cli, emulator) -> None:
    r = cli("gc", "--bucket", "gs://x")
    assert r.code == 2 and "--envs-unused" in one_line_error(r)
