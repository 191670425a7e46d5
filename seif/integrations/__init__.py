"""Native framework integrations, each an optional extra (``pip install 'seif[langchain]'``,
``'seif[openai-agents]'``): :mod:`seif.integrations.langchain` and
:mod:`seif.integrations.openai_agents`. Both hand a framework the exact schemas of one turn
and execute every call through that turn, so its receipts, disclosure report and completion
stay the SDK's; what the model is told of a receipt is :func:`receipt_text`
(:mod:`seif.sdk.text`).
"""

from __future__ import annotations

from seif.sdk.text import receipt_text

__all__ = ["receipt_text"]
