"""The sandbox package's names are found lazily and are the modules' own objects."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap

import pytest

import registry_core.sandbox as sandbox


def _fresh(code: str) -> object:
    done = subprocess.run(
        [sys.executable, "-I", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def test_importing_the_package_loads_no_module_of_it() -> None:
    loaded = _fresh(
        """
        import json, sys
        import registry_core.sandbox
        print(json.dumps(sorted(m for m in sys.modules if m.startswith("registry_core.sandbox."))))
        """
    )
    assert loaded == []


@pytest.mark.parametrize("first", ["package", "modules"])
def test_every_exported_name_is_its_modules_object(first: str) -> None:
    # Whatever was imported first (the package's names, or the modules themselves),
    # each name is the object its module defines -- never a module of the same name.
    wrong = _fresh(
        f"""
        import importlib, json, pkgutil
        import registry_core.sandbox as pkg
        if {first!r} == "modules":
            for info in pkgutil.iter_modules(pkg.__path__):
                importlib.import_module("registry_core.sandbox." + info.name)
        wrong = []
        for name in pkg.__all__:
            home = importlib.import_module("registry_core.sandbox." + pkg._WHERE[name])
            if getattr(pkg, name) is not getattr(home, name):
                wrong.append(name)
        print(json.dumps(wrong))
        """
    )
    assert wrong == []


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(
        AttributeError, match=r"module 'registry_core\.sandbox' has no attribute 'nope'"
    ):
        sandbox.nope  # noqa: B018
    assert sorted(sandbox.__all__) == sorted(sandbox._WHERE)


@pytest.mark.parametrize("name", sorted(sandbox._WHERE))
def test_a_name_not_yet_looked_up_is_found_in_its_module_and_kept(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # In this process: the subprocess tests above import the package afresh, but a
    # name this process already looked up is a plain global and skips __getattr__.
    home = importlib.import_module("registry_core.sandbox." + sandbox._WHERE[name])
    monkeypatch.delitem(vars(sandbox), name, raising=False)
    assert getattr(sandbox, name) is getattr(home, name)
    assert vars(sandbox)[name] is getattr(home, name)  # found once, then a global
