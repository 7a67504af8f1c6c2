"""``python -m a3c`` is the ``a3c`` command."""

from a3c.cli import main

if __name__ == "__main__":
    main()
