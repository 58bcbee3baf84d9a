"""Every recipe on one step: the comparison (``recipes``) and the memory ledger (``memory``)."""
