"""A step's data: the synthetic teacher batch (``synthetic``) and a visitor's own CSV
(``user_data``)."""
