"""The emulator's core: the HTTP server and its dispatch, the `Backend` facade and its lock,
the state, its file, the error bodies.
"""
