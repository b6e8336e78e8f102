"""The opt-in login-password check against real PAM, as a throwaway non-root user.

The account is made with ``useradd`` and ``chpasswd`` (``local_users.py``);
the check runs in a process of that user (pam_unix then verifies through
its setgid helper, as for a screen locker), with the password on stdin.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pam  # type: ignore[import-untyped]
import pytest
from local_users import Account, add_account, python_for, remove_account, shared_dir

import ollie_tray.login_check as login_check

pytestmark = [pytest.mark.realstack]

CHECK = (
    "import sys, login_check\n"
    "password = sys.stdin.readline().rstrip('\\n')\n"
    "print(login_check.verify_login_password(login_check.login_name(), password))\n"
)


@pytest.fixture(scope="module")
def account() -> Iterator[Account]:
    if os.geteuid() != 0:
        pytest.skip("needs root to create a throwaway account")
    name = f"i13pam{secrets.token_hex(3)}"
    password = "Pw-" + secrets.token_urlsafe(12)
    remove_account(name)
    user = add_account(name, password)
    try:
        yield user
    finally:
        remove_account(name)


@pytest.fixture(scope="module")
def code_dir() -> Iterator[Path]:
    """login_check.py and python-pam where the throwaway user can read them."""
    base = shared_dir("ollie-i13-pam-")
    shutil.copy(login_check.__file__, base / "login_check.py")
    shutil.copytree(Path(pam.__file__).parent, base / "pam")
    for path in base.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def check_as(user: Account, code_dir: Path, password: str) -> str:
    result = subprocess.run(
        [
            python_for(user),
            "-I",
            "-c",
            f"import sys; sys.path.insert(0, {str(code_dir)!r})\n" + CHECK,
        ],
        input=password + "\n",
        user=user.uid,
        group=user.gid,
        extra_groups=user.groups,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "HOME": str(user.home)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_right_login_password_is_accepted(account: Account, code_dir: Path) -> None:
    assert check_as(account, code_dir, account.password) == "True"


def test_a_wrong_password_is_refused(account: Account, code_dir: Path) -> None:
    assert check_as(account, code_dir, account.password + "x") == "False"
    assert check_as(account, code_dir, "") == "False"
