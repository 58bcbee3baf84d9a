"""The step and its report: the precision ``policy``, loss scaling (``loss_scale``), the exercise's
and the general step (``step``), a training run's step (``one_step``), the compiled program table
(``compiled``, ``compile_cache``) and the step report (``report``, ``step_report`` and its
parts)."""
