"""Compute Engine's TPU VM instances (compute.googleapis.com v1, beta and alpha paths):
instances, zone operations, machine types and the TPU OS images, as
contributing/emulator-fidelity.md ("Compute Engine") describes them."""
