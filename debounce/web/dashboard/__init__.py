"""The operator's dashboard under ``/admin/`` (docs/dashboard.md): :mod:`.screens` (the pages and
actions, the ``Mount``), :mod:`.auth` (sign-in, the session cookie, CSRF), :mod:`.render`
(templates, error pages, headers), :mod:`.data` and :mod:`.workspaces` (what the pages read);
``templates/`` beside them."""

from debounce.web.dashboard.screens import PAGE_SIZE, mount

__all__ = ["PAGE_SIZE", "mount"]
