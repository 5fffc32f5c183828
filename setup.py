"""Builds the llmsim Python package: python/llmsim plus the C++ extension llmsim._core.

The extension compiles the headers in include/ against the system's Boost and nlohmann_json
(Debian: libboost-dev, nlohmann-json3-dev); the shipped configs/ go into the package.
"""

import os
import shutil

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class build_py_with_configs(build_py):
    """Copies configs/ into the package as llmsim/configs (the SimuMax-style helpers read it)."""

    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "llmsim", "configs")
        shutil.copytree(os.path.join(HERE, "configs"), target, dirs_exist_ok=True)


setup(
    package_dir={"": "python"},
    packages=["llmsim", "llmsim.core"],
    ext_modules=[
        Pybind11Extension("llmsim._core", ["python/src/module.cpp"], include_dirs=[os.path.join(HERE, "include")],
                          cxx_std=20, extra_compile_args=["-O2"])
    ],
    cmdclass={"build_ext": build_ext, "build_py": build_py_with_configs},
    zip_safe=False,
)
