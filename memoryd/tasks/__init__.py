"""Thin Celery tasks: each opens what it needs, calls a plain function, returns counts."""
