"""Conformance with google-cloud-tpu's REST client: what tpuctl's adapters rely on."""

from __future__ import annotations

import ipaddress
from datetime import datetime, timezone

from google.cloud import tpu_v2
from google.protobuf import field_mask_pb2

from tpuctl.catalog import runtime_for

PROJECT = "p"
ZONE = "us-central1-a"
PARENT = f"projects/{PROJECT}/locations/{ZONE}"


def create(
    client,
    node_id: str,
    accelerator: str = "v3-8",
    zone: str = ZONE,
    runtime: str | None = None,
    **fields,
):
    runtime = runtime or runtime_for(accelerator)
    node = tpu_v2.Node(accelerator_type=accelerator, runtime_version=runtime, **fields)
    parent = f"projects/{PROJECT}/locations/{zone}"
    return client.create_node(parent=parent, node_id=node_id, node=node).result(timeout=10)


def delete(client, *names: str) -> None:
    for name in names:
        client.delete_node(name=name).result(timeout=10)


def test_create_returns_a_ready_node(emulator) -> None:
    client = emulator.tpu_client()
    node = create(client, "n1", labels={"team": "ml"}, description="first")
    assert node.name == f"{PARENT}/nodes/n1"
    assert node.state == tpu_v2.Node.State.READY
    assert node.health == tpu_v2.Node.Health.HEALTHY
    assert node.api_version == tpu_v2.Node.ApiVersion.V2
    assert node.accelerator_type == "v3-8"
    assert node.accelerator_config.type_ == tpu_v2.AcceleratorConfig.Type.V3
    assert node.accelerator_config.topology == "2x2"
    assert node.runtime_version == "tpu-ubuntu2204-base"
    assert dict(node.labels) == {"team": "ml"}
    assert node.description == "first"
    assert int(node.id) > 0
    assert node.network_config.network == f"projects/{PROJECT}/global/networks/default"
    assert node.service_account.email.endswith("-compute@developer.gserviceaccount.com")
    assert abs(node.create_time.timestamp() - datetime.now(timezone.utc).timestamp()) < 60
    (endpoint,) = node.network_endpoints
    assert endpoint.port == 8470
    assert ipaddress.ip_address(endpoint.ip_address) in ipaddress.ip_network("127.64.0.0/10")
    assert endpoint.ip_address != "127.0.0.1"
    assert not endpoint.access_config.external_ip  # external IPs were not asked for
    assert client.get_node(name=node.name).id == node.id
    delete(client, node.name)


def test_create_operation_metadata_and_pending_state(emulator) -> None:
    emulator.durations(create=None)  # hold in CREATING until advanced
    client = emulator.tpu_client()
    node = tpu_v2.Node(accelerator_type="v3-8", runtime_version="tpu-vm-base")
    op = client.create_node(parent=PARENT, node_id="slow", node=node)
    assert not op.done()
    assert op.operation.name.startswith(f"{PARENT}/operations/operation-")
    assert op.metadata.verb == "create"
    assert op.metadata.target == f"{PARENT}/nodes/slow"
    assert op.metadata.api_version == "v2"
    assert client.get_node(name=f"{PARENT}/nodes/slow").state == tpu_v2.Node.State.CREATING
    assert emulator.advance(f"{PARENT}/nodes/slow") == [f"{PARENT}/nodes/slow"]
    assert op.result(timeout=10).state == tpu_v2.Node.State.READY
    delete(client, f"{PARENT}/nodes/slow")


def test_external_ips_give_each_endpoint_an_access_config(emulator) -> None:
    client = emulator.tpu_client()
    node = create(client, "ext", network_config=tpu_v2.NetworkConfig(enable_external_ips=True))
    (endpoint,) = node.network_endpoints
    assert endpoint.access_config.external_ip == endpoint.ip_address
    delete(client, node.name)


def test_multi_host_slice_has_one_distinct_address_per_worker(emulator) -> None:
    client = emulator.tpu_client()
    pod = create(client, "pod", "v4-32", zone="us-central2-b")
    addresses = [e.ip_address for e in pod.network_endpoints]
    assert len(addresses) == 4
    assert len(set(addresses)) == 4
    assert all(a.startswith("127.") and a != "127.0.0.1" for a in addresses)
    assert pod.accelerator_config.topology == "2x2x4"
    other = create(client, "other", "v3-8")
    assert other.network_endpoints[0].ip_address not in addresses
    delete(client, pod.name, other.name)


def test_create_by_accelerator_config(emulator) -> None:
    client = emulator.tpu_client()
    config = tpu_v2.AcceleratorConfig(type_=tpu_v2.AcceleratorConfig.Type.V5P, topology="2x2x2")
    node = tpu_v2.Node(accelerator_config=config, runtime_version="v2-alpha-tpuv5")
    result = client.create_node(parent=PARENT, node_id="byconfig", node=node).result(timeout=10)
    assert result.accelerator_type == "v5p-16"
    assert len(result.network_endpoints) == 2
    delete(client, result.name)


def test_list_pages_and_all_zones(emulator) -> None:
    client = emulator.tpu_client()
    names = [create(client, f"n{i}").name for i in range(5)]
    names.append(create(client, "v4", "v4-8", zone="us-central2-b").name)
    create_other = tpu_v2.Node(accelerator_type="v3-8", runtime_version="tpu-vm-base")
    other_project = client.create_node(
        parent=f"projects/q/locations/{ZONE}", node_id="n0", node=create_other
    ).result(timeout=10)

    pager = client.list_nodes(request={"parent": PARENT, "page_size": 2})
    pages = list(pager.pages)
    assert [len(p.nodes) for p in pages] == [2, 2, 1]
    assert [n.name for p in pages for n in p.nodes] == sorted(names[:5])
    assert not pages[-1].next_page_token

    everywhere = [n.name for n in client.list_nodes(parent=f"projects/{PROJECT}/locations/-")]
    assert sorted(everywhere) == sorted(names)
    assert list(client.list_nodes(parent="projects/p/locations/us-east1-d")) == []
    delete(client, *names, other_project.name)


def test_stop_and_start_a_single_host_node(emulator) -> None:
    client = emulator.tpu_client()
    node = create(client, "power", "v5litepod-8", runtime="v2-alpha-tpuv5-lite")
    stopped = client.stop_node(request={"name": node.name}).result(timeout=10)
    assert stopped.state == tpu_v2.Node.State.STOPPED
    assert client.get_node(name=node.name).state == tpu_v2.Node.State.STOPPED
    started = client.start_node(request={"name": node.name}).result(timeout=10)
    assert started.state == tpu_v2.Node.State.READY
    delete(client, node.name)


def test_delete_removes_the_node(emulator) -> None:
    client = emulator.tpu_client()
    node = create(client, "gone")
    op = client.delete_node(name=node.name)
    op.result(timeout=10)
    assert op.done()
    assert emulator.nodes() == []
    assert list(client.list_nodes(parent=PARENT)) == []


def test_patch_labels_description_and_external_ips(emulator) -> None:
    client = emulator.tpu_client()
    node = create(client, "patched", labels={"a": "1", "b": "2"})
    change = tpu_v2.Node(
        name=node.name,
        labels={"a": "1", "c": "3"},
        description="new",
        network_config=tpu_v2.NetworkConfig(enable_external_ips=True),
    )
    mask = field_mask_pb2.FieldMask(
        paths=["labels", "description", "network_config.enable_external_ips"]
    )
    updated = client.update_node(node=change, update_mask=mask).result(timeout=10)
    assert dict(updated.labels) == {"a": "1", "c": "3"}
    assert updated.description == "new"
    assert updated.network_endpoints[0].access_config.external_ip
    again = client.get_node(name=node.name)
    assert dict(again.labels) == {"a": "1", "c": "3"}
    # a field outside the mask is left alone
    client.update_node(
        node=tpu_v2.Node(name=node.name, description="ignored", tags=["t1"]),
        update_mask=field_mask_pb2.FieldMask(paths=["tags"]),
    ).result(timeout=10)
    final = client.get_node(name=node.name)
    assert (final.description, list(final.tags)) == ("new", ["t1"])
    delete(client, node.name)


def test_guest_attributes_one_entry_per_worker(emulator) -> None:
    client = emulator.tpu_client()
    pod = create(client, "ga", "v4-16", zone="us-central2-b")
    # each worker publishes its SSH host key (hostkeys/ssh-ed25519) by itself
    emulator.set_guest_attributes(
        pod.name, 1, [{"namespace": "custom", "key": "k1", "value": "AAAAkey1"}]
    )
    emulator.set_guest_attributes(pod.name, 1, [{"namespace": "other", "key": "k", "value": "v"}])
    request = tpu_v2.GetGuestAttributesRequest(name=pod.name, query_path="custom/")
    response = client.get_guest_attributes(request=request)
    assert len(response.guest_attributes) == 2
    assert [len(g.query_value.items) for g in response.guest_attributes] == [0, 1]
    item = response.guest_attributes[1].query_value.items[0]
    assert (item.namespace, item.key, item.value) == ("custom", "k1", "AAAAkey1")
    only = client.get_guest_attributes(
        request=tpu_v2.GetGuestAttributesRequest(name=pod.name, worker_ids=["1"])
    )
    assert len(only.guest_attributes) == 1
    assert [i.namespace for i in only.guest_attributes[0].query_value.items] == [
        *["hostkeys"] * 3,
        "custom",
        "other",
    ]
    delete(client, pod.name)


def test_accelerator_types_runtime_versions_locations(emulator) -> None:
    client = emulator.tpu_client()
    types = {
        t.type_: t for t in client.list_accelerator_types(parent=f"projects/p/locations/{ZONE}")
    }
    assert "v5litepod-16" in types and "v4-8" not in types
    v5e = types["v5litepod-16"]
    assert v5e.name == f"{PARENT}/acceleratorTypes/v5litepod-16"
    assert v5e.accelerator_configs[0].type_ == tpu_v2.AcceleratorConfig.Type.V5LITE_POD
    assert v5e.accelerator_configs[0].topology == "4x4"
    got = client.get_accelerator_type(name=f"{PARENT}/acceleratorTypes/v3-8")
    assert got.accelerator_configs[0].topology == "2x2"

    versions = [v.version for v in client.list_runtime_versions(parent=PARENT)]
    # the zone's generations' versions: v3, v5e and v5p here, no v6e
    assert "tpu-ubuntu2204-base" in versions and "v2-tpuv5-litepod" in versions
    assert "v2-alpha-tpuv6e" not in versions
    version = client.get_runtime_version(name=f"{PARENT}/runtimeVersions/v2-alpha-tpuv5-lite")
    assert version.version == "v2-alpha-tpuv5-lite"

    from google.cloud.location import locations_pb2

    response = client.list_locations(locations_pb2.ListLocationsRequest(name="projects/p"))
    zones = {loc.location_id for loc in response.locations}
    assert {"us-central1-a", "us-central2-b", "europe-west4-a"} <= zones


def test_operations_get_and_list(emulator) -> None:
    client = emulator.tpu_client()
    node = create(client, "ops")
    from google.longrunning import operations_pb2

    listed = client.list_operations(operations_pb2.ListOperationsRequest(name=PARENT))
    (op,) = listed.operations
    assert op.done
    assert client.get_operation(operations_pb2.GetOperationRequest(name=op.name)).name == op.name
    delete(client, node.name)
