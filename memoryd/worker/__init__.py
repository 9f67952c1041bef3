"""The Celery app, its queues and beat schedule; `celery -A memoryd.worker` starts here.

May import: errors, files, models, settings, tracing.
"""

from memoryd.worker.app import app, make_celery

__all__ = ["app", "make_celery"]
