"""The OpenAI-compatible LLM client and its one retry policy; used by extraction, summaries and
embeddings.

May import: errors, models, settings, tracing.
"""
