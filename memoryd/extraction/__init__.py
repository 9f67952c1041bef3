"""Extraction: a session's claimed batch, one LLM call, gated facts written through the store;
run by the `memoryd.extract_session` task.
"""
