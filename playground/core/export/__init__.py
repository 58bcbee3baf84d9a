"""Exports: the page's step as a runnable JAX script (``jax_script``), as a PyTorch script
(``torch_script``), and PyTorch's autocast rounding of it computed in JAX (``autocast``)."""
