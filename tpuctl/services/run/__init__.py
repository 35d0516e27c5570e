"""`tpuctl run`: one job from a laptop to every worker of a TPU VM and back.

runner.py tells the story; each step has a module of its own:
spec.py (what was asked, the adapters, the outcome), provision.py (the node),
agents.py (the agent protocol), watch.py (statuses and logs), teardown.py (the guard
that leaves no node billing); jobfile.py reads and writes job files (`-f job.toml`,
`--print-spec`). Zone failover is services/zones.py, which `create` shares.
"""
