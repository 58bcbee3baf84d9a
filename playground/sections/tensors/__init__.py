"""Your tensors: a user's safetensors file against every format and block recipe."""
