"""Build of the compiled twins (``engine/records/*_c.pyx``); the rest of the project's
metadata is in setup.cfg.

The extensions are optional: where they cannot be compiled (no C compiler, no Python
headers) setuptools prints "building extension ... failed" and the install goes on with
the pure-Python reference, which ``twinlog --version`` then names. Cython is a build
requirement only (pyproject.toml): the generated C is not kept in the repository.
"""

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

try:
    from Cython.Build import cythonize
except ImportError:  # a build without pyproject.toml's requirements: pure Python only
    cythonize = None  # type: ignore[assignment]


class BuildPyWithoutSetup(build_py):
    """The checkout's root is the ``twinlog`` package (setup.cfg): this script sits in it,
    and is the build's, not the package's."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        modules = super().find_package_modules(package, package_dir)
        return [entry for entry in modules if entry[:2] != ("twinlog", "setup")]


EXTENSIONS = [
    Extension(f"twinlog.engine.records.{name}", [f"engine/records/{name}.pyx"], optional=True)
    for name in ("_record_decoder_c", "_batch_builder_c")
]

if cythonize is None:
    print("twinlog: Cython is not installed: building the pure-Python reference only")
    setup(cmdclass={"build_py": BuildPyWithoutSetup})
else:
    compiled = cythonize(EXTENSIONS, quiet=True)
    for extension in compiled:  # cythonize makes new Extensions, without the flag
        extension.optional = True
    setup(ext_modules=compiled, cmdclass={"build_py": BuildPyWithoutSetup})
