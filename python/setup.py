"""Builds tfvm._tfvm: python/src/_tfvm.c linked with the static libtfvm.a
that the repository's Makefile builds (its objects are position-independent,
the same ones libtfvm.so is made of). Run from a clone: pip install ./python.

TFVM_BUILD: the Makefile's build directory to use (default: build, the one
`make` fills), relative to the repository root."""
import os
import re
import subprocess
import sys

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HEADER = os.path.join(ROOT, "include", "tfvm.h")
if not os.path.exists(HEADER):
    sys.exit("setup.py: %s not found: build the package from a clone of the tfvm repository "
             "(pip install ./python, which builds in place)" % HEADER)
BUILD = os.environ.get("TFVM_BUILD", "build")
LIBA = os.path.join(ROOT, BUILD, "lib", "libtfvm.a")


def version():
    with open(HEADER) as f:
        return re.search(r'#define TFVM_VERSION_STRING "([^"]+)"', f.read()).group(1)


def pkg_libs(name, fallback):
    try:
        out = subprocess.run(["pkg-config", "--libs-only-l", name], capture_output=True, text=True, check=True)
        return [w[2:] for w in out.stdout.split() if w.startswith("-l")] or [fallback]
    except (OSError, subprocess.CalledProcessError):
        return [fallback]


class BuildWithLibtfvm(build_ext):
    """build_ext that first has make bring libtfvm.a up to date."""

    def run(self):
        jobs = os.environ.get("TFVM_MAKE_JOBS", "2")
        subprocess.run(["make", "-C", ROOT, "-j" + jobs, "BUILD=" + BUILD, os.path.join(BUILD, "lib", "libtfvm.a")],
                       check=True)
        # always relink: the in-place build keeps python/build/ between builds,
        # and its extension may come from another TFVM_BUILD or compiler
        self.force = True
        super().run()
        # the CUDA backend, when make built it (nvcc found): beside the
        # extension, where libtfvm looks for it first (docs/devices.md)
        cuda = os.path.join(ROOT, BUILD, "lib", "libtfvm_cuda.so")
        if os.path.exists(cuda):
            self.copy_file(cuda, os.path.join(self.build_lib, "tfvm", "libtfvm_cuda.so"))


ext = Extension(
    "tfvm._tfvm",
    sources=["src/_tfvm.c"],
    include_dirs=[os.path.join(ROOT, "include"), numpy.get_include()],
    extra_objects=[LIBA],
    libraries=pkg_libs("hwloc", "hwloc") + pkg_libs("libprotobuf-c", "protobuf-c") + ["m", "dl"],
    extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wvla", "-Wpointer-arith",
                        "-Wno-missing-field-initializers",
                        "-Wno-cast-function-type", "-pthread"],
    # libtfvm's symbols stay inside the extension
    extra_link_args=["-pthread", "-Wl,--exclude-libs,ALL"],
    depends=[LIBA, HEADER, os.path.join(ROOT, "include", "tfvm_debug.h")],
)

setup(version=version(), ext_modules=[ext], cmdclass={"build_ext": BuildWithLibtfvm})
