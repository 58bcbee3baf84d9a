"""Settings and their price: the settings table (``fields``, ``block_settings``), the one validated
``StepConfig`` (``settings``) and the cost model of a request's work (``cost``) and of its
first call's compile (``compile_cost``)."""
