"""Cloud Storage: fake-gcs-server, the proxy in front of it, and what it does not keep of a
bucket (lifecycle rules, metageneration).
"""
