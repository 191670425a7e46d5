"""Guided tool setup (docs/authoring.md): the operations ``seif tool``, ``seif starter``,
``seif release`` and the Design workstation (``seif design``) share.

Every change to a project file is an :class:`~compiler.authoring.source.Edit`: the new text,
computed by splicing the change into the file (so the rest of the file, its key order, its
indentation and its comments, stays byte for byte), checked by compiling it, and written only
when it validates.
"""
