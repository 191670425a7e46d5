"""Native framework integrations, each an optional extra (``pip install 'seif[langchain]'``,
``'seif[openai-agents]'``, ``'seif[langgraph]'``): :mod:`seif.integrations.langchain`,
:mod:`seif.integrations.openai_agents` and :mod:`seif.integrations.langgraph`. Each hands a
framework the exact schemas of one turn and executes every call through that turn, so its
receipts, disclosure report and completion stay the SDK's; what the model is told of a receipt
is :func:`receipt_text` (:mod:`seif.sdk.text`). A call held for a human approval becomes the
framework's own pause: an OpenAI Agents interruption, a LangGraph ``interrupt()``
(:mod:`seif.integrations.approvals` holds what both share).
"""

from __future__ import annotations

from seif.sdk.text import receipt_text

__all__ = ["receipt_text"]
