"""The agent's targets, one module per kind the client names (`--target KIND:NAME`):
`targets/KIND.py`, whose `TARGET` class is what the job runs on (target.py). The agent
ships those of the APIs it knows (tpu.py, compute.py); the bundle carries a further API's
as its adapter declares it (`BackendKind.agent_module`, bundle.py), under this package.

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""
