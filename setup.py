# Kept for old pip versions; all metadata lives in setup.cfg.
from setuptools import setup

setup()
