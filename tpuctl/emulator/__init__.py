"""A local, stateful emulator of the Cloud TPU v2 REST API (see docs/emulator.md).

models: nodes and operations with their state machines; rules and errors: what the
service refuses and how; backend: state, clock, persistence; server: REST paths and
the control plane. Only `tpuctl emulator` and the tests import this package.
"""
