"""The runtime's service layer (``service``): resolve, execute, approve; everything checked
before serving (``startup``), the events it logs and answers (``events``), bounded pending
approvals (``pending``), what is recorded of client text (``redact``), resolutions computed
once (``resolved``), its plain values (``values``) and its one error type (``errors``).
"""
