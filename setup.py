"""One build step that pyproject.toml cannot declare: the native core in a strict editable install.

Everything else is in pyproject.toml, including the extension itself ([tool.setuptools-rust]).
setuptools-rust wraps this build_ext and, after it runs, builds native/ and copies the library to
where build_ext's `inplace` says. An editable install sets `inplace`, which puts the library in the
source tree's kafkamc/, where the strict mode's link tree (README's install) never looks: it links
only the files the build commands list as outputs. So in strict mode the library goes to build_lib
and is listed here, and the link tree copies it; the source tree stays as committed.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext


def _strict_editable(cmd: build_ext) -> bool:
    wheel = cmd.distribution.get_command_obj("editable_wheel", create=False)
    return str(getattr(wheel, "mode", None) or "").lower() == "strict"


class BuildExt(build_ext):
    def run(self) -> None:
        super().run()
        if self.editable_mode and _strict_editable(self):
            self.inplace = False  # read by setuptools-rust's build_rust, which runs next

    def get_outputs(self) -> list[str]:
        # The Rust libraries build_rust left in build_lib (none when the optional build failed).
        rust = [str(p) for p in Path(self.build_lib, "kafkamc").glob("_core.*") if not self.inplace]
        return super().get_outputs() + rust


setup(cmdclass={"build_ext": BuildExt})
