"""arelu: sparse output layers for text generation (alpha-ReLU, softmax, sparsemax, alpha-entmax).

The library part users import is :mod:`arelu_cli.transforms` (transforms and losses) and
:mod:`arelu_cli.registry` (transforms by name); the rest is the ``arelu`` experiment suite.
"""

__version__ = "0.1.0"
