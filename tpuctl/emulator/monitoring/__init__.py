"""Cloud Monitoring (monitoring.googleapis.com): time series of the workers, over REST and
gRPC.
"""
