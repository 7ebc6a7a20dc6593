"""The one exception type the CLI turns into a one-line message and a non-zero exit."""


class UserError(ValueError):
    """Bad input from the user: the message says what is wrong and what to do."""
