"""The policy store's cross-process rules: lock file, lost writes, lock-free lookups."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from policy_helpers import HOST, FakeClock, lookup, remember

from registry_core.elevation import policies as policies_module
from registry_core.elevation.policies import PolicyStore
from registry_core.elevation.prompter import Remember
from registry_core.errors import PolicyError
from registry_core.file_lock import exclusive


def test_a_write_by_a_program_ignoring_the_lock_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "policies.yaml"
    store = PolicyStore(path, clock=FakeClock())
    remember(store, Remember.DENY_ALWAYS)
    real_render = policies_module.render_document

    def render_while_someone_writes(*args: Any) -> str:
        # Between our read and our rename, a program that takes no lock rewrites the file.
        path.write_text(path.read_text() + "# a hand edit\n")
        return real_render(*args)

    monkeypatch.setattr(policies_module, "render_document", render_while_someone_writes)
    with pytest.raises(PolicyError, match="changed while being read"):
        store.revoke("greet")
    assert "# a hand edit" in path.read_text()  # not overwritten


def test_lookups_do_not_take_the_file_lock(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    store = PolicyStore(path, clock=FakeClock(), lock_timeout=0.05)
    remember(store, Remember.DENY_ALWAYS)
    other = PolicyStore(path, clock=FakeClock(), lock_timeout=0.05)
    with exclusive(path.with_name("policies.yaml.lock")):
        assert lookup(other) is not None  # the read path never waits for writers
        assert other.list()
        with pytest.raises(PolicyError, match="could not lock"):
            other.revoke("greet")
    assert other.revoke("greet") == 1


def test_the_lock_file_is_not_followed_when_a_link(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    target = tmp_path / "elsewhere"
    os.symlink(target, path.with_name("policies.yaml.lock"))
    store = PolicyStore(path, clock=FakeClock())
    with pytest.raises(PolicyError, match="symbolic link"):
        store.revoke_all()
    assert not target.exists()
    assert HOST
