"""The emulated TPU VMs: their files, sandbox, SSH servers and sessions, and the faults planted
on them.
"""
