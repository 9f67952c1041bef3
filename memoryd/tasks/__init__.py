"""Thin Celery tasks, one module per stage: each calls a plain function and returns counts."""
