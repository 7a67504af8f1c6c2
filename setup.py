"""The packages to install: a3c/ and its subpackages, and envs/ (at the top of the repo) as ``a3c_envs``, so
that nothing generic is claimed in site-packages. Everything else is in setup.cfg."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["a3c", "a3c.*"]), "a3c_envs"])
