"""Who may do what: the VMs' service accounts and their tokens, the access gate, IAM and
Resource Manager subsets, organisation policies, the Policy Troubleshooter and OS Login.
"""
