"""The one thing pyproject.toml cannot say: the C extensions, the stats tokenizer and the
firehose's frame cutter."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("cascade_sim._tokenizer", ["cascade_sim/_tokenizer.c"], extra_compile_args=["-O2"]),
        Extension("cascade_nats._frames", ["cascade_nats/_frames.c"], extra_compile_args=["-O2"]),
    ]
)
