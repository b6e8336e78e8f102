"""Opt-in: the person's login password confirms every approval (PAM, through python-pam).

Where the platform cannot guarantee that a click on Approve came from a
person (compositors that offer virtual input to every client; see
docs/security.md, "Only a person approves"), a person can ask for more than
a click: with ``ollie-tray --require-password`` (or
``OLLIE_TRAY_REQUIRE_PASSWORD=1``) an approval counts only after the login
password of the user running the tray is typed and verified through PAM
(service :data:`PAM_SERVICE`, as a screen locker does).  A program that can
inject clicks still cannot approve without knowing the password.

The password is handled like the sudo password: typed into a masked field,
wiped from it when the dialog ends, never logged, stored or passed on;
verification runs in a worker thread (PAM may delay a wrong answer by
seconds) so the tray stays responsive.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping

REQUIRE_PASSWORD_ENV = "OLLIE_TRAY_REQUIRE_PASSWORD"  # noqa: S105 (a variable's name)
PAM_SERVICE = "login"
ATTEMPTS = 3


def require_password_from(env: Mapping[str, str]) -> bool:
    return env.get(REQUIRE_PASSWORD_ENV, "").strip().lower() in {"1", "yes", "true", "on"}


def login_name() -> str:
    """The account whose password confirms approvals: the user running the tray."""
    return pwd.getpwuid(os.getuid()).pw_name


def verify_login_password(user: str, password: str, service: str = PAM_SERVICE) -> bool:
    """True if PAM accepts ``password`` for ``user`` (no session, no credentials set)."""
    import pam  # type: ignore[import-untyped]  # python-pam: imported only when the option is on

    checker = pam.pam()
    return bool(checker.authenticate(user, password, service=service, resetcreds=False))
