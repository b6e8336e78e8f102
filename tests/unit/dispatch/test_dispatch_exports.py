"""registry_core.dispatch's lazy names (PEP 562): each from its module, nothing else."""

from __future__ import annotations

import importlib

import pytest

import registry_core.dispatch as dispatch

HOMES = {
    "CallOptions": "dispatcher",
    "Dispatcher": "dispatcher",
    "parallel_safe": "dispatcher",
    "plan_batches": "dispatcher",
    "sandbox_path": "dispatcher",
    "validate_args": "dispatcher",
    "Authorization": "gate",
    "ElevationGate": "gate",
    "ElevationRequest": "gate",
    "Kind": "gate",
    "RefusingGate": "gate",
    "CallResult": "result",
}


@pytest.mark.parametrize(("name", "module"), sorted(HOMES.items()))
def test_each_name_is_its_modules_object(name: str, module: str) -> None:
    home = importlib.import_module(f"registry_core.dispatch.{module}")
    assert getattr(dispatch, name) is getattr(home, name)


def test_the_exported_names_are_exactly_those() -> None:
    assert sorted(dispatch.__all__) == sorted(HOMES)


def test_an_unknown_name_is_an_attribute_error_word_for_word() -> None:
    with pytest.raises(AttributeError) as caught:
        _ = dispatch.no_such_name
    assert str(caught.value) == "module 'registry_core.dispatch' has no attribute 'no_such_name'"
    # A submodule's own name that is not exported is not reached through the package.
    with pytest.raises(AttributeError):
        _ = dispatch.run_process
