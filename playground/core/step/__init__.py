"""The step and its report: the precision ``policy``, loss scaling (``loss_scale``), the
mixed-precision rule every step runs (``step``: the exercise's, its float32 twin, the general
step and a training run's step, as options of one rule), the compiled program table
(``compiled``, ``compile_cache``) and the step report (``report`` and its parts)."""
