"""Maintenance on Celery beat: promotion, expiry and archiving of memories, and compression of
long sessions.
"""
