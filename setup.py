"""setup.py - builds the plexus wheel from the CMake build (see pyproject.toml).

The extension module, the built-in kernels and libplexus.so.0 come from the CMake build
folder (PLEXUS_BUILD, default build/); when it has no extension yet, it is configured and
built first (cmake, the targets plexus_python and plexus_pykernels). The wheel's extension
finds the copy of libplexus.so.0 beside it ($ORIGIN is on its run path).
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(os.environ.get("PLEXUS_BUILD", os.path.join(HERE, "build")))
# setuptools' own files go below the CMake build folder, never into its lib/ or the sources
PIP_DIR = os.path.join(BUILD, "pip")
os.makedirs(PIP_DIR, exist_ok=True)


class BuildPy(build_py):
    def run(self):
        build = BUILD
        pkg = os.path.join(build, "python", "plexus")
        if not glob.glob(os.path.join(pkg, "_plexus_cffi*.so")):
            print("plexus: no extension in %s: building it with CMake" % pkg)
            subprocess.check_call(["cmake", "-S", HERE, "-B", build,
                                   "-DPython3_EXECUTABLE=" + os.path.realpath(sys.executable)])
            subprocess.check_call(["cmake", "--build", build, "-j", "2", "--target",
                                   "plexus_python", "plexus_pykernels", "plexus_python_files"])
        super().run()
        dst = os.path.join(self.build_lib, "plexus")
        os.makedirs(dst, exist_ok=True)
        libs = glob.glob(os.path.join(pkg, "*.so"))
        if not any(os.path.basename(f).startswith("_plexus_cffi") for f in libs):
            sys.exit("plexus: the build in %s has no extension module (_plexus_cffi*.so): "
                     "run `make` (or set PLEXUS_BUILD to a build folder that has one)" % build)
        for f in libs:
            shutil.copy2(f, dst)
        core = os.path.join(build, "lib", "libplexus.so.0")
        if not os.path.exists(core):
            sys.exit("plexus: %s is missing: run `make` first" % core)
        shutil.copy2(os.path.realpath(core), os.path.join(dst, "libplexus.so.0"))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):  # a platform wheel: it carries compiled code
        return True


setup(cmdclass={"build_py": BuildPy}, distclass=BinaryDistribution,
      options={"build": {"build_base": PIP_DIR}, "egg_info": {"egg_base": PIP_DIR}})
