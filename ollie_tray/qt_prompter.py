"""The tray's front-end: Qt dialogs as a :class:`~registry_core.broker.question.Prompter`.

The broker core asks one question at a time; this class turns each into a
dialog and an ``asyncio`` future that the dialog's signal resolves, so no
thread ever blocks on the GUI and no nested event loop runs.  When the
broker cancels a question (requester gone, timeout, shutdown) the dialog is
withdrawn.  Requests denied from a notification or the menu before their
dialog appears are answered "deny" as soon as their turn comes.

Keyring: with the user's consent the sudo password is kept in the Secret
Service and used for the first attempt of a later, already approved request;
a stored password that sudo rejects is deleted and the person asked.  Without
a recorded consent for that user@host (:mod:`ollie_tray.keyring_consent`) the
keyring is never touched, not even probed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtWidgets import QDialog

from ollie_tray.dialogs.approval import ApprovalDialog
from ollie_tray.dialogs.login_check import LoginCheckDialog
from ollie_tray.dialogs.password import PasswordDialog
from ollie_tray.dialogs.real_input import InputJudge
from ollie_tray.keyring_consent import KeyringConsent
from ollie_tray.login_check import ATTEMPTS, login_name, verify_login_password
from ollie_tray.secret_store import PasswordVault
from registry_core.broker.decide.core import QueueInfo
from registry_core.broker.question import (
    Approval,
    ApprovalRequest,
    PasswordAnswer,
    PasswordRequest,
    Remember,
)

log = logging.getLogger(__name__)

AskingDialog = ApprovalDialog | PasswordDialog | LoginCheckDialog
"""The dialogs a question is shown in; each can be withdrawn."""


@dataclass
class _PasswordSource:
    """Where the password of a grant's last attempt came from."""

    from_keyring: bool = False
    store_requested: bool = False


@dataclass
class PrompterSettings:
    countdown_s: int = 60
    arm_delay_ms: int = 700
    judge: InputJudge | None = None
    """Who may approve (dialogs/real_input.py); None: the dialog's fail-closed default."""
    require_password: bool = False
    """Opt-in: an approval counts only after the login password (login_check.py)."""
    verify_password: Callable[[str, str], bool] | None = None
    """(user, password) → accepted; None: PAM (login_check.verify_login_password)."""


@dataclass
class QtPrompter:
    vault: PasswordVault | None = None
    consent: KeyringConsent | None = None
    settings: PrompterSettings = field(default_factory=PrompterSettings)
    on_dialog: Callable[[QDialog | None], None] | None = None
    queue_info: Callable[[str], QueueInfo | None] | None = None
    """Where a request stands in the broker's queue (wired in app.py)."""
    deny_all: Callable[[], None] | None = None
    """Deny every queued request (the dialog's "Deny all pending"; wired in app.py)."""
    _denied_early: set[str] = field(default_factory=set)
    _current: AskingDialog | None = None
    _current_id: str | None = None
    _sources: dict[str, _PasswordSource] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return "tray"

    def available(self) -> bool:
        return True

    @property
    def current_dialog(self) -> QDialog | None:
        return self._current

    def _set_current(self, dialog: AskingDialog | None, request_id: str | None) -> None:
        self._current = dialog
        self._current_id = request_id
        if self.on_dialog is not None:
            self.on_dialog(dialog)

    def raise_dialog(self) -> None:
        if self._current is not None:
            self._current.show()
            self._current.raise_()
            self._current.activateWindow()

    def queue_changed(self) -> None:
        """The broker's queue changed: the open approval dialog updates "1 of N"."""
        dialog, request_id = self._current, self._current_id
        if isinstance(dialog, ApprovalDialog) and request_id and self.queue_info is not None:
            with contextlib.suppress(RuntimeError):  # the dialog is being deleted
                dialog.set_queue(self.queue_info(request_id))

    @property
    def current_request_id(self) -> str | None:
        return self._current_id

    def deny(self, request_id: str) -> None:
        """Deny from outside the dialog (a notification's Deny, the menu)."""
        if self._current_id == request_id and isinstance(self._current, ApprovalDialog):
            self._current.deny_button.click()
        else:
            self._denied_early.add(request_id)

    async def _wait(self, dialog: AskingDialog, request_id: str, signal_name: str) -> object:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[object] = loop.create_future()

        def resolve(value: object) -> None:
            if not future.done():
                future.set_result(value)

        getattr(dialog, signal_name).connect(resolve)
        self._set_current(dialog, request_id)
        dialog.show()
        dialog.raise_()
        dialog.activateWindow()
        try:
            return await future
        except asyncio.CancelledError:
            dialog.withdraw("withdrawn")
            raise
        finally:
            self._set_current(None, None)
            dialog.deleteLater()

    async def ask_approval(self, request: ApprovalRequest) -> Approval:
        if request.id in self._denied_early:
            self._denied_early.discard(request.id)
            return Approval(False, Remember.ONCE, "denied from the notification")
        dialog = ApprovalDialog(
            request,
            countdown_s=int(min(self.settings.countdown_s, request.timeout)),
            arm_delay_ms=self.settings.arm_delay_ms,
            judge=self.settings.judge,
        )
        if self.queue_info is not None:
            dialog.set_queue(self.queue_info(request.id))
        if self.deny_all is not None:
            dialog.deny_all_requested.connect(self.deny_all)
        result = await self._wait(dialog, request.id, "decided")
        assert isinstance(result, Approval)
        confirm = result.approved and self.settings.require_password
        if confirm and not await self._confirm_with_login_password(request):
            return Approval(False, Remember.ONCE, "the login password was not confirmed")
        return result

    async def _confirm_with_login_password(self, request: ApprovalRequest) -> bool:
        """Up to three tries; PAM runs in a worker thread.  The password is not kept."""
        verify = self.settings.verify_password or verify_login_password
        user = login_name()
        retry = ""
        for attempt in range(1, ATTEMPTS + 1):
            dialog = LoginCheckDialog(request.tool, user, retry)
            typed = await self._wait(dialog, request.id, "submitted")
            if not isinstance(typed, str) or not typed:
                return False
            accepted = await asyncio.to_thread(verify, user, typed)
            del typed
            if accepted:
                return True
            retry = f"Wrong password, try again ({attempt}/{ATTEMPTS})"
        return False

    async def ask_password(self, request: PasswordRequest) -> PasswordAnswer:
        grant_key = request.approval.id
        source = self._sources.setdefault(grant_key, _PasswordSource())
        user, host = request.user, request.approval.host
        local = not request.approval.remote
        # The keyring is touched (even probed) only for a user@host the person ticked
        # "Remember in keyring" for before: asking a Secret Service can raise unlock or
        # "new keyring" prompts of its own, seconds late (keyring_consent.py).
        consent = self.consent is not None and local and self.consent.granted(user, host)
        vault = self.vault if consent else None
        if request.retry and vault is not None and (source.from_keyring or source.store_requested):
            # sudo rejected what we stored (or what the user asked us to store).
            await vault.delete_async(user, host)
        keyring_ok = True if vault is None else await vault.available_async()
        if not request.retry and vault is not None and keyring_ok:
            stored = await vault.get_async(user, host)
            if stored is not None:
                source.from_keyring = True
                return PasswordAnswer(stored)
        source.from_keyring = False
        judge = self.settings.judge
        dialog = PasswordDialog(
            request,
            keyring_available=keyring_ok,
            test_banner=judge is not None and judge.accepts_synthetic,
        )
        result = await self._wait(dialog, request.id, "submitted")
        assert isinstance(result, PasswordAnswer)
        source.store_requested = result.store_in_keyring and result.password is not None
        if result.password is not None:
            await self._remember(user, host, result.password, result.store_in_keyring, consent)
        return result

    async def _remember(
        self, user: str, host: str, password: str, store: bool, had_consent: bool
    ) -> None:
        """Keep the password (and the consent) when ticked; unticked, forget the consent."""
        if self.consent is None or self.vault is None:
            return
        if store:
            if await self.vault.store_async(user, host, password):
                self.consent.grant(user, host)
        elif had_consent:
            # The box was left unticked this time: no more keyring use for user@host.
            self.consent.revoke(user, host)

    def request_decided(self, request_id: str, approved: bool, by: str) -> None:
        self._denied_early.discard(request_id)
        if self._current_id == request_id and self._current is not None:
            with contextlib.suppress(RuntimeError):
                self._current.withdraw(by)

    def forget_grant(self, approval_id: str) -> None:
        self._sources.pop(approval_id, None)
