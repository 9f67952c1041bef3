"""Extraction: a session's claimed batch, one LLM call, gated facts written through the store;
run by the `memoryd.extract_session` task.

May import: agents, errors, ingest, llm, memories, models, prompts, recall, settings,
text, tracing, zones.
"""
