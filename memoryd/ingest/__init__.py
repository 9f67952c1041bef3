"""Ingest: validate and buffer turns (client calls or the `memoryd.ingest_turns` task), claim
batches under leases, send extract triggers.

May import: errors, llm, models, settings, text, worker.
"""
