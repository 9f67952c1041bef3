"""Celery app, queues and beat schedule."""

from memoryd.worker.app import app, make_celery

__all__ = ["app", "make_celery"]
