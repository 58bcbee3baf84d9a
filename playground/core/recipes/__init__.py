"""Compute recipes: the registry of ``compute_dtype`` values (``registry``), per-tensor float8
(``float8``, ``float8_report``) and the block-scaled recipes (``block_formats`` and the quantizer,
matmul, statistics and views built on it). Imports only ``formats``."""
