"""The test suite, in folders that mirror the packages they test (``tests/policy/engine/`` holds
the tests of ``policy/engine/``), the tests of the docs in ``tests/docs/`` and the helpers in
``tests/support/``, imported by their package path (``from tests.support.runtime_harness import
...``)."""
