"""Start-up: the credentials and bindings files, the approval token, and everything checked before
serving.
"""
