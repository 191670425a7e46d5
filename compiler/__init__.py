"""The seif compiler: project declarations to the policy IR, and builds.

Public API::

    from compiler import compile_project, load_build, CompileError
"""

from compiler.builds.build import Build, load_build, write_build
from compiler.diagnostics import CompileError, Diagnostic
from compiler.driver import CompileResult, compile_file, compile_project, compile_text

__all__ = [
    "compile_project",
    "compile_file",
    "compile_text",
    "CompileResult",
    "CompileError",
    "Diagnostic",
    "Build",
    "load_build",
    "write_build",
]
