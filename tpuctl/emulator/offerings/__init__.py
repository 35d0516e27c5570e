"""What the emulated cloud offers, in the emulator's own tables: accelerator types
(accelerators.py), the zones that offer each generation (zones.py), runtime versions and
what their images carry (runtimes.py), TPU quotas (quotas.py) and the Google APIs the
emulator serves (apis.py). Compute Engine's TPU machine types are in compute/catalog.py.

Written from Google's public documentation (each module cites its pages), not read from
tpuctl's catalogue: client code and the emulator keep one table each, and
tests/test_offerings.py checks that they agree wherever both speak, so a wrong table on
one side is caught rather than mirrored on the other.
"""
