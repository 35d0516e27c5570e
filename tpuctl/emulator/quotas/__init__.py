"""Cloud Quotas and Service Usage: TPU quota enforcement and capacity, quota infos and
preferences, the services of a project.
"""
