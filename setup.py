"""The native core, kafkamc._core (native/, issue 40): the one part of the build pyproject.toml
does not declare. Everything else is there.

The extension is optional: without cargo, or when its build fails, the install still succeeds
with the pure-Python engine (checker/core/native.py says which). debug=False: an editable install
would otherwise build it unoptimised. It is declared here rather than in [tool.setuptools-rust],
from which setuptools-rust wraps build_ext twice and runs cargo twice.

setuptools-rust wraps the build_ext below and, after it runs, builds native/ and copies the
library to where build_ext's `inplace` says. An editable install sets `inplace`, which would put
the library in the source tree's kafkamc/, where the strict mode's link tree (the README's
install) never looks: it takes only the files the build commands list as outputs. So in strict
mode the library goes to build_lib and is listed here, and the link tree copies it.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools_rust import RustExtension

CORE = RustExtension("kafkamc._core", "native/Cargo.toml", features=["python"], optional=True, debug=False)


def _strict_editable(cmd: build_ext) -> bool:
    wheel = cmd.distribution.get_command_obj("editable_wheel", create=False)
    return str(getattr(wheel, "mode", None) or "").lower() == "strict"


class BuildExt(build_ext):
    def _built(self) -> list[Path]:
        return list(Path(self.build_lib, "kafkamc").glob("_core.*"))

    def run(self) -> None:
        # `pip install .` reuses the source tree's build/lib: a library left there by an earlier
        # install would be shipped again if this build failed, an old core posing as the new one.
        for stale in self._built():
            stale.unlink()
        super().run()
        if self.editable_mode and _strict_editable(self):
            self.inplace = False  # read by setuptools-rust's build_rust, which runs next

    def get_outputs(self) -> list[str]:
        # The library build_rust left in build_lib (none when the optional build failed).
        rust = [] if self.inplace else [str(p) for p in self._built()]
        return super().get_outputs() + rust


setup(rust_extensions=[CORE], cmdclass={"build_ext": BuildExt})
