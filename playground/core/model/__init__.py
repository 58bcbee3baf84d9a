"""The model: the registry of networks (``models``), the loss by task (``losses``), precision per
operation (``op_policy``), the watched forward pass (``forward_pass``) and the optimizer registry
(``optimizers``)."""
