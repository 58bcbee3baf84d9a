"""A user's own tensors: a safetensors file read exactly (``reading``) and every tensor
against every value format (``formats``) and block recipe (``blocks``), joined in ``report``."""
