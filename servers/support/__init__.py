"""Small pieces shared by the other parts: the one cache helper (``memo``, LRU), a bounded map of
live entries (``bounded``) and thread-to-loop hand-offs (``handoff``).
"""
