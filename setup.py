"""Package discovery and the rendered manuals for setuptools; the rest is in pyproject.toml.

The checkout keeps the shipped data at the top (``resources/``, ``desktop/``);
in a wheel it lives inside the ``registry_core`` package as
``registry_core/_data`` (and ``registry_core/_data/desktop``), where
``registry_core.paths.resources_dir`` finds it.  A static package list in
pyproject.toml cannot both discover the code packages and map these two.

``build_py`` also renders every command's manual page and shell completions
from its argument parser (``ollie_tray.manuals``) into ``registry_core/_data``,
so a wheel carries them without committed generated files.
"""

import sys
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py


class BuildWithManuals(build_py):
    def run(self) -> None:
        super().run()
        if self.dry_run:
            return
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        try:
            from ollie_tray.manuals import render_all
        finally:
            sys.path.pop(0)
        root = Path(self.build_lib) / "registry_core" / "_data"
        render_all(root, release=self.distribution.get_version())


setup(
    packages=[
        *find_packages(include=["registry_core", "registry_core.*", "ollie_tray", "ollie_tray.*"]),
        "registry_core._data",
        "registry_core._data.desktop",
    ],
    package_dir={
        "registry_core._data": "resources",
        "registry_core._data.desktop": "desktop",
    },
    cmdclass={"build_py": BuildWithManuals},
)
