"""Debian's Chromium and chromedriver, which the dashboard's browser tests
(``tests/test_dashboard_browser.py``, marked ``browser``) drive through Selenium.

The browser tests are their own command (``pytest -m browser``): ``pytest`` alone deselects
them (``conftest.py``), so the suite needs nothing outside the virtualenv. A run that selects
them on a machine without these two binaries stops before any test with one line saying what
to install (:func:`missing_line`): it fails, it never skips.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CHROMEDRIVER", "CHROMIUM", "INSTALL", "missing_line"]

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
INSTALL = "apt-get install -y chromium chromium-driver"


def missing_line() -> str | None:
    """The line saying what the browser tests lack, or ``None`` when both binaries are here."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if not missing:
        return None
    return (
        f"the dashboard's browser tests (pytest -m browser) need {' and '.join(missing)}: "
        f"install Debian's browser with `{INSTALL}`"
    )
