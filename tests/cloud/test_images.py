"""Images of Artifact Registry resolved as docker resolves them (cloud/image_registry.py),
against the emulator's registry with images pushed here: by tag and by digest, a tag
moved afterwards, an index, the refusals as one line each; references checked
(cloud/images.py); whether a VM's account may pull (the Policy Troubleshooter)."""

from __future__ import annotations

import pytest

from tests.emulator import registry_helpers as reg
from tpuctl.cloud.clients import ClientFactory
from tpuctl.cloud.images import PULL_PERMISSION, parse_image, pull_access
from tpuctl.emulator.tpu.models import project_number
from tpuctl.errors import ExitCode, NotFoundError, PermissionDeniedError, UsageError

IMAGE = reg.NAME  # us-docker.pkg.dev/tpuctl-demo/images/trainer
VM_ACCOUNT = f"{project_number(reg.PROJECT)}-compute@developer.gserviceaccount.com"
ENTRY = {"Entrypoint": ["python3"], "Cmd": ["train.py"], "WorkingDir": "/app", "Env": ["A=1"]}


@pytest.fixture
def auth(emulator) -> dict[str, str]:
    """Bearer auth to push to the emulator's registry, the repository made."""
    reg.make_repository(emulator.address)
    registry = str(emulator.status()["registry_endpoint"])
    return {"Authorization": f"Bearer {reg.token(registry)}"}


def _registry(emulator) -> str:
    return str(emulator.status()["registry_endpoint"])


def test_a_tag_resolves_to_its_digest_and_a_moved_tag_changes_nothing_resolved(
    emulator, auth
) -> None:
    registry = _registry(emulator)
    first = reg.push(registry, auth, "v1", "one", config=ENTRY)
    images = ClientFactory().images()

    resolved = images.resolve(parse_image(f"{IMAGE}:v1"))
    assert (resolved.digest, resolved.manifest_digest) == (first, first)
    assert resolved.pinned == f"{IMAGE}@{first}"
    assert (resolved.host, resolved.repository) == (
        "us-docker.pkg.dev",
        "tpuctl-demo/images/trainer",
    )
    assert (resolved.entrypoint, resolved.cmd) == (["python3"], ["train.py"])
    assert (resolved.working_dir, resolved.env) == ("/app", ["A=1"])
    assert resolved.media_type == reg.OCI_MANIFEST

    # the tag moves: what was resolved stays; the old digest still resolves to itself
    second = reg.push(registry, auth, "v1", "two")
    assert second != first
    assert resolved.digest == first
    assert images.resolve(parse_image(f"{IMAGE}:v1")).digest == second
    by_digest = images.resolve(parse_image(f"{IMAGE}@{first}"))
    assert (by_digest.digest, by_digest.cmd) == (first, ["train.py"])
    again = images.resolve(parse_image(f"{IMAGE}:v1"))
    assert (again.cmd, again.working_dir) == (["sh", "/app/run.sh"], "/app")


def test_an_index_resolves_to_its_digest_and_its_linux_amd64_image(emulator, auth) -> None:
    registry = _registry(emulator)
    arm = reg.push(registry, auth, "arm", "arm", config={"Cmd": ["arm"]})
    amd = reg.push(registry, auth, "amd", "amd", config={"Cmd": ["amd"]})
    index = reg.push_index(
        registry, auth, "multi", [("linux", "arm64", arm), ("linux", "amd64", amd)]
    )

    resolved = ClientFactory().images().resolve(parse_image(f"{IMAGE}:multi"))
    assert (resolved.digest, resolved.manifest_digest) == (index, amd)
    assert resolved.media_type == reg.OCI_INDEX
    assert resolved.cmd == ["amd"]
    assert resolved.pinned.endswith(f"@{index}")

    only_arm = reg.push_index(registry, auth, "arm-only", [("linux", "arm64", arm)])
    with pytest.raises(NotFoundError, match="has no linux/amd64 image"):
        ClientFactory().images().resolve(parse_image(f"{IMAGE}@{only_arm}"))


def test_a_missing_repository_image_or_tag_and_a_refused_pull_are_one_line_each(
    emulator, auth
) -> None:
    registry = _registry(emulator)
    reg.push(registry, auth, "v1", "one")
    images = ClientFactory().images()

    with pytest.raises(NotFoundError) as missing_tag:
        images.resolve(parse_image(f"{IMAGE}:v9"))
    assert str(missing_tag.value) == f"tag not found: {IMAGE}:v9 has no tag 'v9'"
    other = IMAGE.replace("trainer", "server")
    with pytest.raises(NotFoundError) as missing_image:
        images.resolve(parse_image(f"{other}:v1"))
    assert str(missing_image.value) == f"image not found: {other}:v1 is not in the registry"
    absent = "sha256:" + "0" * 64
    with pytest.raises(NotFoundError, match="is not in the registry"):
        images.resolve(parse_image(f"{IMAGE}@{absent}"))
    nowhere = IMAGE.replace("/images/", "/nope/")
    with pytest.raises(NotFoundError) as missing_repo:
        images.resolve(parse_image(f"{nowhere}:v1"))
    assert "repository projects/tpuctl-demo/locations/us/repositories/nope does not exist" in (
        str(missing_repo.value)
    )

    emulator.config(denied_permissions=[PULL_PERMISSION])
    with pytest.raises(PermissionDeniedError) as denied:
        images.resolve(parse_image(f"{IMAGE}:v1"))
    caller = emulator.status()["caller"]
    assert str(denied.value) == (
        f"permission denied pulling {IMAGE}:v1: {caller} lacks {PULL_PERMISSION} on "
        "projects/tpuctl-demo/locations/us/repositories/images"
    )
    assert "roles/artifactregistry.reader" in str(denied.value.hint)
    for error in (missing_tag, missing_image, missing_repo, denied):
        assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("ubuntu:22.04", "tpuctl pulls images from Artifact Registry only"),
        ("docker.io/library/ubuntu:22.04", "docker.io is not Artifact Registry"),
        ("gcr.io/tpuctl-demo/trainer:v1", "gcr.io is not Artifact Registry"),
        ("us-docker.pkg.dev/tpuctl-demo/trainer", "not an Artifact Registry image name"),
        ("us-docker.pkg.dev/tpuctl-demo/images/Trainer", "not an Artifact Registry image name"),
        (f"{IMAGE}@sha256:abc", "a digest is sha256: and 64 lower-case hex digits"),
        ("", "tpuctl pulls images from Artifact Registry only"),
    ],
)
def test_a_bad_reference_is_a_usage_error_naming_it_and_the_form(text: str, why: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_image(text)
    assert refused.value.exit_code == ExitCode.USAGE == 2
    message = str(refused.value)
    assert message.startswith(f"invalid --image {text!r}: {why}")
    assert message.endswith(
        "; use LOCATION-docker.pkg.dev/PROJECT/REPOSITORY/IMAGE[:TAG|@sha256:DIGEST]"
    )


def test_references_name_their_parts() -> None:
    ref = parse_image("europe-west4-docker.pkg.dev/my-project/repo-1/team/trainer")
    assert (ref.location, ref.project, ref.repository, ref.image) == (
        "europe-west4",
        "my-project",
        "repo-1",
        "team/trainer",
    )
    assert (ref.tag, ref.digest, ref.reference) == ("latest", None, "latest")
    digest = "sha256:" + "ab" * 32
    pinned = parse_image(f"{IMAGE}:v1@{digest}")
    assert (pinned.tag, pinned.reference, str(pinned)) == ("v1", digest, f"{IMAGE}:v1@{digest}")


def test_whether_a_vm_account_may_pull_is_the_troubleshooters_verdict(emulator, auth) -> None:
    ref = parse_image(f"{IMAGE}:v1")
    iam = ClientFactory().iam()
    allowed = pull_access(iam, ref, VM_ACCOUNT)
    assert (allowed.verdict, allowed.granted) == ("GRANTED", True)

    emulator.config(service_accounts={VM_ACCOUNT: {"denied_permissions": [PULL_PERMISSION]}})
    refused = pull_access(iam, ref, VM_ACCOUNT)
    assert (refused.verdict, refused.granted) == ("NOT_GRANTED", False)
    assert refused.message == (
        f"{VM_ACCOUNT} cannot pull {IMAGE}:v1: it lacks {PULL_PERMISSION} on "
        "projects/tpuctl-demo/locations/us/repositories/images"
    )
    assert f"--member=serviceAccount:{VM_ACCOUNT} --role=roles/artifactregistry.reader" in (
        refused.hint
    )

    # the caller may not read the repository's policy: it cannot be told
    emulator.config(denied_permissions=["artifactregistry.repositories.getIamPolicy"])
    unknown = pull_access(iam, ref, VM_ACCOUNT)
    assert (unknown.verdict, unknown.granted) == ("UNKNOWN_INFO_DENIED", None)
