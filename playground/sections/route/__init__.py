"""The route as the page shows it (``view``); its chapters are ``core.lessons.route``."""
