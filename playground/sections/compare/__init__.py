"""The Compare recipes section: every recipe on the same step, and what each keeps in memory."""
