"""The operator console: the job list and page, the stalled-jobs list, actions and health.

Modules: ``job`` (list and read-only page), ``stalled`` (the stalled list and its proxy model),
``actions`` (what an operator may do, gated by state, cause and permission; each a service call),
``mixins`` (confirmation page, messages, 403), ``filters``, ``health`` (the health page) and
``chart`` (its inline SVG), ``registry`` (links and retry variants other apps contribute).
"""

from jobs.admin import job, stalled  # noqa: F401  (importing them registers the admin classes)
