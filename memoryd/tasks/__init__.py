"""Thin Celery tasks, one module per stage: each calls a plain function and returns counts.

May import: errors, extraction, ingest, maintenance, models, recall, settings, tracing,
worker.
"""
