"""tpuctl: a command-line manager for the whole life of Google Cloud TPU VMs."""

import warnings

__version__ = "0.1.0"

# asyncssh names DSA key types, which cryptography deprecates: five warning lines on every
# command that connects, about a key type tpuctl never makes or accepts (its keys are
# ed25519; hosts publish ed25519, ECDSA and RSA). Only that warning, only from asyncssh.
warnings.filterwarnings("ignore", message="DSA is deprecated", module="asyncssh")
