"""Maintenance on Celery beat: promotion, expiry and archiving of memories, and compression of
long sessions.

May import: errors, ingest, llm, memories, models, prompts, settings.
"""
