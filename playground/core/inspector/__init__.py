"""The precision inspector: a typed number read exactly (``typed_number``) and how each registered
format stores it (``inspector``)."""
