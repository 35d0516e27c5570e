"""A local, stateful emulator of the Google Cloud APIs tpuctl uses (see docs/emulator.md).

Laid out the way moto lays out its services, one subpackage per cloud service:
- core: the HTTP server and its dispatch, the `Backend` facade that holds the lock, the
  state (no lock), its file, Google's error bodies;
- tpu: the Cloud TPU API (nodes, operations, queued resources, the catalogue);
- storage: Cloud Storage (fake-gcs-server, its proxy, bucket lifecycle rules);
- iam: service accounts and tokens, the access gate, IAM, Resource Manager, organisation
  policies, the Policy Troubleshooter, OS Login;
- monitoring: Cloud Monitoring; quotas: Cloud Quotas and Service Usage;
- metadata: the workers' metadata server; workers: the TPU VMs' files, sandbox and SSH;
- control: the control plane, its client, and `tpuctl emulator`'s background process.
Only `tpuctl emulator` (cli/emulator_cmd/) and the tests import this package.
"""
