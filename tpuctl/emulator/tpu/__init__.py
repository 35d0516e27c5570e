"""The Cloud TPU API (tpu.googleapis.com): nodes, operations, queued resources and the
catalogue; models, rules, the REST and gRPC fronts, the routes.
"""
