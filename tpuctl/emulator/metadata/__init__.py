"""The workers' metadata server (metadata.google.internal)."""
