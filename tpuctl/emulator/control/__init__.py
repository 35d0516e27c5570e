"""The control plane (`/_emulator/v1/...`): its methods over the state, its client, and `tpuctl
emulator`'s background process.
"""
