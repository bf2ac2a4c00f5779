"""``python -m gradgate``: the command line (importing this module runs nothing)."""

if __name__ == "__main__":
    from .cli import main

    main()
