"""Numbers and formats: the dtype registry (``dtypes``), rounding an exact number once
(``exact_rounding``), how a low-precision parameter takes its update (``rounding``) and the
distance of a step from float32 (``metrics``). Imports nothing else of the core."""
