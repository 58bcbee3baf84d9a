"""A step's data: the synthetic teacher batch (``synthetic``) and a user's own CSV
(``user_data``)."""
