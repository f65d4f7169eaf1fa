"""The one thing pyproject.toml cannot say: the stats tokenizer, a C extension."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("cascade_sim._tokenizer", ["cascade_sim/_tokenizer.c"], extra_compile_args=["-O2"])])
