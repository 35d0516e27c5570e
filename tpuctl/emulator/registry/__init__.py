"""Artifact Registry (artifactregistry.googleapis.com): the REST API's Docker
repositories (`repositories.py`, `urls.py`) and the Docker registry API of
`LOCATION-docker.pkg.dev` on a port of its own (`distribution.py`, `server.py`), its
blobs kept content-addressed in files (`blobs.py`)."""
