"""A local, stateful emulator of the Cloud TPU v2 REST API (see docs/emulator.md).

Laid out the way moto lays out a service:
- models: nodes, operations and queued resources, with their state machines;
  rules and errors: what the service refuses, and how;
- state: everything the cloud holds, with no lock; tpu_api, queued, catalog_api,
  quotas and control_api: the API methods over it; persistence: state.json;
- backend: the facade that holds the lock; urls: the path table; server: HTTP;
- storage (fake-gcs-server), ssh_workers, workers, metadata: what the TPU VMs see;
- daemon: the pid file and the background process of `tpuctl emulator`.
Only `tpuctl emulator` (cli/emulator_cmd.py) and the tests import this package.
"""
