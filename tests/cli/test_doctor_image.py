"""tpuctl doctor --image, and the check `run --image` gates on (services/doctor/image.py):
images built and pushed here to the emulator's registry, layer by layer, read back as
names; whiteouts; the budget; the cache by manifest digest; the VM's account denied."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest

from tests.cli.conftest import one_line_error
from tests.emulator import registry_helpers as reg
from tpuctl.cloud.clients import ClientFactory
from tpuctl.cloud.image_layers import Layer, member_names
from tpuctl.cloud.images import PULL_PERMISSION, parse_image
from tpuctl.emulator.tpu.models import project_number
from tpuctl.errors import CloudError
from tpuctl.services.doctor.image import check_image, frameworks_of, runtime_findings

IMAGE = reg.NAME  # us-docker.pkg.dev/tpuctl-demo/images/trainer
VM_ACCOUNT = f"{project_number(reg.PROJECT)}-compute@developer.gserviceaccount.com"
SITE = "usr/lib/python3/site-packages"
JAX = [f"{SITE}/jax/__init__.py", f"{SITE}/jaxlib/__init__.py", f"{SITE}/jax-0.4.30.dist-info/"]
GZIP = bytes((0x1F, 0x8B))  # gzip's magic
LIBTPU = [f"{SITE}/libtpu/libtpu.so", f"{SITE}/libtpu-0.0.2.dist-info/"]


def _layer(paths: list[str], compress: bool = True) -> bytes:
    """A layer tar (gzip, or plain) with these files (a trailing `/`: a folder)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for path in paths:
            info = tarfile.TarInfo(path.rstrip("/"))
            if path.endswith("/"):
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = 2
                tar.addfile(info, io.BytesIO(b"x\n"))
    return gzip.compress(raw.getvalue()) if compress else raw.getvalue()


def _push(registry: str, auth: dict[str, str], tag: str, layers: list[bytes]) -> str:
    """An image of these layers (lowest first) as IMAGE:tag; its manifest's digest."""
    for layer in layers:
        reg.push_blob_in_chunks(registry, auth, layer)
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {}}).encode()
    path = f"/v2/{reg.NAME}/blobs/uploads/?digest={reg.digest(config)}"
    assert reg.send(registry, "POST", path, config, **auth)[0] == 201
    kinds = {True: "tar+gzip", False: "tar"}
    manifest = {
        "schemaVersion": 2,
        "mediaType": reg.OCI_MANIFEST,
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": reg.digest(config),
            "size": len(config),
        },
        "layers": [
            {
                "mediaType": f"application/vnd.oci.image.layer.v1.{kinds[layer[:2] == GZIP]}",
                "digest": reg.digest(layer),
                "size": len(layer),
            }
            for layer in layers
        ],
    }
    body = json.dumps(manifest).encode()
    return reg.put_manifest(registry, auth, tag, body, reg.OCI_MANIFEST, reg.NAME)


@pytest.fixture
def registry(emulator) -> tuple[str, dict[str, str]]:
    """The emulator's registry address and Bearer auth to push there, the repository made."""
    reg.make_repository(emulator.address)
    address = str(emulator.status()["registry_endpoint"])
    return address, {"Authorization": f"Bearer {reg.token(address)}"}


def test_an_image_with_jax_and_libtpu_is_ok_with_versions(cli, registry) -> None:
    _push(*registry, "good", [_layer(["usr/bin/python3"]), _layer(JAX + LIBTPU, compress=False)])
    r = cli("doctor", "--image", f"{IMAGE}:good")
    assert (r.code, r.out) == (0, ""), r.err
    assert f"{IMAGE}:good (sha256:" in r.err
    assert "jax 0.4.30, libtpu 0.0.2; 0 errors, 0 warnings, 0 hints" in r.err

    r = cli("doctor", "--image", f"{IMAGE}:good", "--json")
    found = json.loads(r.out)
    assert (found["frameworks"], found["findings"]) == ({"jax": "0.4.30", "libtpu": "0.0.2"}, [])
    assert found["pinned"].startswith(f"{IMAGE}@sha256:")


def test_an_image_with_no_tpu_runtime_is_an_error_as_a_scripts(cli, registry) -> None:
    _push(*registry, "cpu", [_layer(["usr/bin/python3", f"{SITE}/numpy/__init__.py"])])
    r = cli("doctor", "--image", f"{IMAGE}:cpu")
    assert r.code == 1  # as a script's error
    head, fix = r.out.splitlines()
    assert head == (
        f"{IMAGE}:cpu: error: {IMAGE}:cpu has no libtpu (jax[tpu]), torch_xla or TensorFlow "
        "TPU build: on a TPU VM its Python finds no TPU [image-no-tpu-runtime]"
    )
    assert fix.startswith('    fix: in the Dockerfile, RUN pip install -U "jax[tpu]" (JAX)')
    assert "https://cloud.google.com/tpu/docs/run-in-container" in fix
    assert "1 error, 0 warnings, 0 hints" in r.err


def test_jax_without_libtpu_is_an_error(cli, registry) -> None:
    _push(*registry, "jaxcpu", [_layer(JAX)])
    r = cli("doctor", "--image", f"{IMAGE}:jaxcpu", "--json")
    assert r.code == 1
    (finding,) = json.loads(r.out)["findings"]
    assert (finding["check"], finding["severity"]) == ("image-jax-no-libtpu", "error")
    assert 'RUN pip install -U "jax[tpu]==0.4.30"' in finding["fix"]


def test_a_later_layers_whiteout_deletes_libtpu(cli, registry) -> None:
    base = _layer(JAX + LIBTPU)
    gone = _layer([f"{SITE}/.wh.libtpu", f"{SITE}/.wh.libtpu-0.0.2.dist-info"])
    _push(*registry, "wh", [base, gone])
    r = cli("doctor", "--image", f"{IMAGE}:wh")
    assert r.code == 1 and "[image-jax-no-libtpu]" in r.out

    # an opaque folder hides everything the layers below had in it
    opaque = _layer([f"{SITE}/.wh..wh..opq", f"{SITE}/numpy/__init__.py"])
    _push(*registry, "opq", [base, opaque])
    assert "[image-no-tpu-runtime]" in cli("doctor", "--image", f"{IMAGE}:opq").out
    # a whiteout of a folder above site-packages takes it all
    _push(*registry, "up", [base, _layer(["usr/lib/.wh.python3"])])
    assert "[image-no-tpu-runtime]" in cli("doctor", "--image", f"{IMAGE}:up").out
    # and a later layer may put it back
    _push(*registry, "back", [base, gone, _layer(LIBTPU)])
    assert cli("doctor", "--image", f"{IMAGE}:back").code == 0


def test_layers_over_the_budget_are_not_read(emulator, registry, tmp_path: Path) -> None:
    _push(*registry, "big", [_layer(["usr/bin/python3"])])
    factory = ClientFactory()
    resolved = factory.images().resolve(parse_image(f"{IMAGE}:big"))
    cache = tmp_path / "cache"
    report = check_image(factory.images(), None, resolved, reg.PROJECT, budget=10, cache=cache)
    (finding,) = report.findings
    assert (finding.severity, finding.check, report.frameworks) == (
        "warning",
        "image-not-checked",
        None,
    )
    assert "not checked: the image's layers are " in finding.message
    assert finding.message.endswith("bytes; tpuctl doctor --image checks it whole")
    assert not cache.exists()  # not kept: doctor --image may read it whole


def test_a_verdict_is_kept_by_digest_and_the_image_not_read_again(
    emulator, registry, tmp_path: Path
) -> None:
    digest = _push(*registry, "kept", [_layer(JAX + LIBTPU)])
    cache = tmp_path / "cache"
    factory = ClientFactory()
    images, iam = factory.images(), factory.iam()
    resolved = images.resolve(parse_image(f"{IMAGE}:kept"))
    assert check_image(images, iam, resolved, reg.PROJECT, cache=cache).findings == []
    assert [p.name for p in cache.iterdir()] == [f"{digest.replace(':', '-')}.json"]

    # the registry now refuses the caller every read: a second check reads no blob
    emulator.config(denied_permissions=[PULL_PERMISSION])
    again = check_image(images, iam, resolved, reg.PROJECT, cache=cache)
    assert (again.findings, again.frameworks) == ([], {"jax": "0.4.30", "libtpu": "0.0.2"})
    # without the kept verdict it would have had to read the layers, and could not
    fresh = check_image(images, iam, resolved, reg.PROJECT, cache=tmp_path / "other")
    assert [f.check for f in fresh.findings] == ["image-not-checked"]
    assert "permission denied pulling" in fresh.findings[0].message


def test_the_vm_account_denied_or_unknown(cli, emulator, registry) -> None:
    _push(*registry, "v1", [_layer(JAX + LIBTPU)])
    assert cli("doctor", "--image", f"{IMAGE}:v1").code == 0
    emulator.config(service_accounts={VM_ACCOUNT: {"denied_permissions": [PULL_PERMISSION]}})
    r = cli("doctor", "--image", f"{IMAGE}:v1")
    assert r.code == 1
    head, fix = r.out.splitlines()
    assert head == (
        f"{IMAGE}:v1: error: the VM's service account {VM_ACCOUNT} cannot pull {IMAGE}:v1 "
        f"(it lacks {PULL_PERMISSION}, e.g. roles/artifactregistry.reader on the repository) "
        "[image-pull-denied]"
    )
    assert fix.startswith("    fix: grant it roles/artifactregistry.reader")
    assert f"--member=serviceAccount:{VM_ACCOUNT}" in fix

    other = "trainer@tpuctl-demo.iam.gserviceaccount.com"  # the one asked about, if given
    r = cli("doctor", "--image", f"{IMAGE}:v1", "--service-account", other)
    assert f"the VM's service account {other} cannot pull" in r.out

    emulator.config(denied_permissions=["artifactregistry.repositories.getIamPolicy"])
    r = cli("doctor", "--image", f"{IMAGE}:v1")
    assert r.code == 0
    assert r.out.startswith(f"{IMAGE}:v1: warning: could not check whether the VM's service")
    assert "[image-pull-unknown]" in r.out


def test_a_bad_reference_or_both_forms_are_one_line_exit_2(cli) -> None:
    r = cli("doctor", "--image", "ubuntu:22.04")
    assert r.code == 2
    assert one_line_error(r).startswith("error: invalid --image 'ubuntu:22.04': ")
    r = cli("doctor", "train.py", "--image", f"{IMAGE}:v1")
    assert r.code == 2 and "one of them" in one_line_error(r)
    assert cli("doctor").code == 2


@pytest.mark.parametrize(
    ("paths", "found", "checks"),
    [
        (
            [f"{SITE}/torch_xla/__init__.py", f"{SITE}/torch_xla-2.5.0.dist-info/"],
            {"torch_xla": "2.5.0"},
            [],
        ),
        (
            [f"{SITE}/tensorflow/__init__.py", f"{SITE}/tensorflow_tpu-2.18.0.dist-info/"],
            {"tensorflow": "2.18.0", "tensorflow_tpu": "2.18.0"},
            [],
        ),
        (
            [f"{SITE}/tensorflow/__init__.py", f"{SITE}/tensorflow-2.18.0.dist-info/"],
            {"tensorflow": "2.18.0"},
            ["image-no-tpu-runtime"],
        ),
        (["usr/local/lib/python3.10/dist-packages/libtpu/libtpu.so"], {"libtpu": ""}, []),
        ([f"{SITE}/jax/__init__.py"], {}, ["image-no-tpu-runtime"]),  # no jaxlib: no JAX
    ],
)
def test_what_counts_as_a_tpu_runtime(paths: list[str], found: dict[str, str], checks) -> None:
    assert frameworks_of([paths]) == found
    assert [f.check for f in runtime_findings(IMAGE, found)] == checks


class _Raw:
    """A blob body as urllib3 streams it."""

    def __init__(self, data: bytes) -> None:
        self.body = io.BytesIO(data)

    def read(self, size: int, decode_content: bool = True) -> bytes:
        assert decode_content is False  # a blob is read as stored
        return self.body.read(size)


def test_a_layer_is_believed_only_for_its_digests_bytes_and_size() -> None:
    ref = parse_image(f"{IMAGE}:v1")
    data = _layer(LIBTPU)
    right = Layer(reg.digest(data), len(data), "application/vnd.oci.image.layer.v1.tar+gzip")
    assert member_names(_Raw(data), right, ref) == [f"{SITE}/libtpu/libtpu.so", LIBTPU[1][:-1]]
    with pytest.raises(CloudError, match="with other bytes: refused"):
        member_names(_Raw(data), Layer(reg.digest(b"x"), len(data), ""), ref)
    with pytest.raises(CloudError, match="longer than its 10 bytes: refused"):
        member_names(_Raw(data), Layer(right.digest, 10, ""), ref)
    with pytest.raises(CloudError, match="is not a gzip or plain tar"):
        member_names(_Raw(b"\x28\xb5\x2f\xfd" + b"0" * 600), Layer(right.digest, 604, "zstd"), ref)
